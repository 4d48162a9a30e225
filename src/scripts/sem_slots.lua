-- Takes ARGV[4] permits of the semaphore KEYS[1] (limit ARGV[3]) on one of
-- several independent nodes (Redlock), all or nothing, as that many of its
-- `limit` numbered slots. KEYS[1] is a sorted set of holders scored by the end
-- of their lease (server ms); a holder's member "<permits>:<slots>:<uuid>"
-- names its slots ("0-1.5": slots 0, 1 and 5). A slot is taken while a
-- holder whose lease has not ended names it; ended holders are removed first.
-- ARGV[1] is the attempt's token "<permits>:*:<uuid>", ARGV[2] the lease in ms,
-- ARGV[5] the first slot to try: the free slots are taken in the order
-- ARGV[5], ARGV[5] + 1, ... (mod limit), the same order on every node, so nodes
-- that agree on what is taken grant the same slots.
-- Returns {1, 0, member} when taken (the member written, the token the holder
-- renews and releases with), or {0, ms until the earliest lease ends} when
-- too few slots are free.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local permits = tonumber(ARGV[4])
local uuid = string.match(ARGV[1], '^%d+:%*:(.+)$')
if not uuid then
  return redis.error_reply('ERR lockdog: malformed semaphore attempt token')
end
local suffix = ':' .. uuid
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local taken = {}
local used = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if string.sub(m, -#suffix) == suffix then
    -- An attempt that reached this node twice is granted once.
    return {1, 0, m}
  end
  used = used + (tonumber(string.match(m, '^(%d+):')) or 1)
  local runs = string.match(m, '^%d+:([%d%.%-]+):')
  if runs then
    for run in string.gmatch(runs, '[^%.]+') do
      local a, b = string.match(run, '^(%d+)%-?(%d*)$')
      a = tonumber(a)
      if a then
        for s = a, tonumber(b) or a do
          taken[s] = true
        end
      end
    end
  end
end
local function busy()
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local wait = 0
  if first[2] then
    wait = math.max(0, tonumber(first[2]) - now)
  end
  return {0, wait}
end
if used + permits > limit then
  return busy()
end
local got = {}
local start = tonumber(ARGV[5]) % limit
for i = 0, limit - 1 do
  local s = (start + i) % limit
  if not taken[s] then
    got[#got + 1] = s
    if #got == permits then
      break
    end
  end
end
if #got < permits then
  return busy()
end
table.sort(got)
local runs = {}
local a, b = got[1], got[1]
for i = 2, #got + 1 do
  local s = got[i]
  if s ~= nil and s == b + 1 then
    b = s
  else
    runs[#runs + 1] = (a == b) and tostring(a) or (a .. '-' .. b)
    a, b = s, s
  end
end
local member = permits .. ':' .. table.concat(runs, '.') .. suffix
redis.call('ZADD', KEYS[1], now + ttl, member)
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {1, 0, member}
