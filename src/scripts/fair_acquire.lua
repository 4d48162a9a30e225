-- A fair lock: takes KEYS[1] for token ARGV[1] with a TTL of ARGV[2] ms only
-- when it is free and this token is first in the line kept in Redis.
-- KEYS[2] orders the waiting tokens by arrival (server µs); KEYS[3] holds each
-- place's lease end (server ms). Each attempt renews the caller's place for
-- ARGV[3] ms (0: a single attempt that takes no place, and takes the key only
-- when nobody waits); a place whose lease ended (a crashed or departed waiter) is
-- dropped, so the line never wedges. Both sets expire once nobody waits.
-- A key already holding this token counts as ours (a retried attempt whose
-- reply was lost). Returns {1, 0} when taken, or {0, -1, 1} while another
-- owner holds the key or an earlier waiter is first in line.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  redis.call('ZREM', KEYS[2], m)
  redis.call('ZREM', KEYS[3], m)
end
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  return {1, 0}
end
if lease == 0 and not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  if holder or redis.call('EXISTS', KEYS[2]) == 1 then
    return {0, -1, 1}
  end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, 0}
end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  -- Arrival in server microseconds, strictly after the last place in line
  -- (two waiters arriving within one tick keep their order).
  local at = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if last[2] and tonumber(last[2]) >= at then
    at = tonumber(last[2]) + 1
  end
  redis.call('ZADD', KEYS[2], at, ARGV[1])
end
redis.call('ZADD', KEYS[3], now + lease, ARGV[1])
redis.call('PEXPIRE', KEYS[2], lease * 2)
redis.call('PEXPIRE', KEYS[3], lease * 2)
if holder then
  -- No remaining TTL in the answer: a waiter that heard of it would pause
  -- until the holder's lease ends, and its place must be renewed sooner.
  return {0, -1, 1}
end
local head = redis.call('ZRANGE', KEYS[2], 0, 0)
if head[1] ~= ARGV[1] then
  return {0, -1, 1}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return {1, 0}
