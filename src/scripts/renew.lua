-- Renews many locks in one call (the watchdog's batch for one node).
-- ARGV[1] is the number of locks; then, per lock, three values: how many of
-- KEYS are its keys (they follow each other in lock order), its token, and
-- its TTL in ms. A lock is renewed only if every one of its keys still holds
-- its token; a missing or foreign key is never touched, never recreated.
-- Returns one result per lock: 1 renewed, 0 no longer held, -1 a PEXPIRE failed.
local out = {}
local k = 1
local a = 2
for l = 1, tonumber(ARGV[1]) do
  local n = tonumber(ARGV[a])
  local token = ARGV[a + 1]
  local ttl = ARGV[a + 2]
  local held = 1
  for i = k, k + n - 1 do
    if redis.call('GET', KEYS[i]) ~= token then
      held = 0
      break
    end
  end
  if held == 1 then
    for i = k, k + n - 1 do
      local r = redis.pcall('PEXPIRE', KEYS[i], ttl)
      if type(r) == 'table' and r.err then
        held = -1
      end
    end
  end
  out[l] = held
  k = k + n
  a = a + 3
end
return out
