-- A fair semaphore (or read-write lock): takes the permits of token ARGV[1]
-- ("<permits>:<uuid>") in KEYS[1] (holders' tokens scored by lease end, server
-- ms; limit ARGV[3]) with a lease of ARGV[2] ms, all or nothing, only when
-- they fit together with those of every earlier waiter still in line. So no
-- waiter is ever delayed by one that came later, and when permits come free
-- the waiters at the head of the line enter together as far as they fit (a
-- read-write lock's readers, one permit each, until a writer who needs all).
-- KEYS[2] orders the waiting tokens by arrival (server µs); KEYS[3] holds each
-- place's lease end (server ms). Each attempt renews the caller's place for
-- ARGV[4] ms (0: a single attempt that takes no place); a place whose lease
-- ended (a crashed or departed waiter) is dropped, so the line never wedges,
-- and so is a holder whose lease ended. Both line sets expire once nobody waits.
-- A token already holding counts as ours (a retried attempt whose reply was
-- lost). Returns {1, 0} when taken, or {0, ms, 1} while waiting: the next
-- attempt is due within ms (when the earliest holder's lease ends, or a third
-- of the place's lease) unless a release notice comes first; {0, -1, 1} for a
-- single attempt.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local free = tonumber(ARGV[3])
local lease = tonumber(ARGV[4])
local function permits(m)
  return tonumber(string.match(m, '^(%d+):')) or 1
end
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  redis.call('ZREM', KEYS[2], m)
  redis.call('ZREM', KEYS[3], m)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local placed = redis.call('ZSCORE', KEYS[2], ARGV[1])
local held = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not held then
  local holders = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  local due = math.floor(lease / 3)
  for i = 1, #holders, 2 do
    free = free - permits(holders[i])
    due = math.min(due, tonumber(holders[i + 1]) - now)
  end
  -- The permits of every earlier waiter, then ours (a caller without a place
  -- counts as the last in line).
  local need = permits(ARGV[1])
  for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if m == ARGV[1] or need > free then
      break
    end
    need = need + permits(m)
  end
  if need > free then
    if lease > 0 then
      if not placed then
        -- Arrival in server microseconds, strictly after the last place in line.
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
      return {0, math.max(0, due), 1}
    end
    return {0, -1, 1}
  end
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
if placed then
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
end
return {1, 0}
