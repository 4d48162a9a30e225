-- Renews many locks in one call (the watchdog's batch for one node).
-- ARGV[1] is the number of locks; then, per lock, three values: how many of
-- KEYS are its keys (they follow each other in lock order), its token, and
-- its TTL in ms. A lock is renewed only if every one of its keys still holds
-- its token; a missing or foreign key is never touched, never recreated.
-- A semaphore's key is a sorted set of holders' tokens scored by lease end
-- (server ms): there the token must be a member whose lease has not ended,
-- and renewing moves its score; the set's own TTL only ever grows.
-- Returns one result per lock: 1 renewed, 0 no longer held, -1 a PEXPIRE failed.
local now
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
local out = {}
local k = 1
local a = 2
for l = 1, tonumber(ARGV[1]) do
  local n = tonumber(ARGV[a])
  local token = ARGV[a + 1]
  local ttl = ARGV[a + 2]
  local held = 1
  local sets = {}
  for i = k, k + n - 1 do
    local v = redis.pcall('GET', KEYS[i])
    if type(v) == 'table' and v.err then
      local score = redis.pcall('ZSCORE', KEYS[i], token)
      if type(score) ~= 'string' or tonumber(score) <= clock() then
        held = 0
        break
      end
      sets[i] = true
    elseif v ~= token then
      held = 0
      break
    end
  end
  if held == 1 then
    for i = k, k + n - 1 do
      local r
      if sets[i] then
        redis.call('ZADD', KEYS[i], 'XX', clock() + tonumber(ttl), token)
        if redis.call('PTTL', KEYS[i]) < tonumber(ttl) then
          r = redis.pcall('PEXPIRE', KEYS[i], ttl)
        end
      else
        r = redis.pcall('PEXPIRE', KEYS[i], ttl)
      end
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
