-- Sets a TTL of ARGV[2] ms on every key in KEYS, only if all of them still hold
-- token ARGV[1]. Never creates a key: a missing or foreign value means the lock
-- is lost. A semaphore's key (a sorted set of holders' tokens scored by lease
-- end, server ms) is held while the token is a member whose lease has not
-- ended; renewing moves its score, and the set's own TTL only ever grows.
-- Returns 1 when extended, 0 when the lock is no longer held.
local now
local sets = {}
for i = 1, #KEYS do
  local v = redis.pcall('GET', KEYS[i])
  if type(v) == 'table' and v.err then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local score = redis.pcall('ZSCORE', KEYS[i], ARGV[1])
    if type(score) ~= 'string' or tonumber(score) <= now then
      return 0
    end
    sets[i] = true
  elseif v ~= ARGV[1] then
    return 0
  end
end
for i = 1, #KEYS do
  if sets[i] then
    redis.call('ZADD', KEYS[i], 'XX', now + tonumber(ARGV[2]), ARGV[1])
    if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[2]) then
      redis.call('PEXPIRE', KEYS[i], ARGV[2])
    end
  else
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
return 1
