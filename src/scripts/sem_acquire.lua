-- Takes ARGV[4] permits of the semaphore KEYS[1] (limit ARGV[3]) for token
-- ARGV[1] with a lease of ARGV[2] ms: all or nothing. KEYS[1] is a sorted set
-- of holders' tokens scored by the end of their lease (server ms); a token
-- "<permits>:<uuid>" counts as that many permits. Holders whose lease ended
-- are removed first, so a crashed holder's permits come back by themselves.
-- A token already in the set counts as ours (a retried attempt whose reply
-- was lost).
-- ARGV[5] is the kind: 's' a semaphore, or for a read-write lock 'r' a reader
-- (one permit) and 'w' a writer (every permit). A writer that must wait marks
-- itself in KEYS[2] (its token, a lease of ARGV[6] ms, renewed by each of its
-- attempts; 0: a single attempt, no mark); no new reader gets in while that
-- mark lives (writer preference).
-- Returns {1, 0} when taken, or {0, ms until the earliest lease ends, 1} when
-- too few permits are free.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local permits = tonumber(ARGV[4])
local kind = ARGV[5] or 's'
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  if kind == 'r' and redis.call('EXISTS', KEYS[2]) == 1 then
    return {0, math.max(0, redis.call('PTTL', KEYS[2])), 1}
  end
  local used = 0
  for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    used = used + (tonumber(string.match(m, '^(%d+):')) or 1)
  end
  if used + permits > limit then
    if kind == 'w' and tonumber(ARGV[6]) > 0 then
      redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[6])
    end
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    local wait = 0
    if first[2] then
      wait = math.max(0, tonumber(first[2]) - now)
    end
    return {0, wait, 1}
  end
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
if kind == 'w' and redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
return {1, 0}
