-- A fair lock: takes KEYS[1] for token ARGV[1] with a TTL of ARGV[2] ms only
-- when it is free and no live waiter came earlier. KEYS[2] is the line, a list
-- of waiting tokens in arrival order; a waiter's place is the key
-- KEYS[2] .. ':' .. token (in the same hash slot), holding the TTL it asks for
-- and the number of the attempt that last renewed it (ARGV[4]), "<ttl>:<n>",
-- leased for ARGV[3] ms: each attempt renews it, and a place whose lease
-- ended (a crashed or departed waiter) no longer counts, so the line never
-- wedges. A release hands the key straight to the first live waiter (see
-- fair_release.lua), so a waiter usually makes one attempt per acquisition.
-- ARGV[3] 0: a single attempt that takes no place and takes the key only when
-- nobody waits.
-- A key already holding this token counts as ours (handed over, or a retried
-- attempt whose reply was lost): its TTL is re-armed. Returns {1, 0} when
-- taken, or {0, ms, 1} while waiting: the next attempt is due within ms (a
-- third of the place's lease) unless a hand-off comes first.
local lease = tonumber(ARGV[3])
local holder = redis.call('GET', KEYS[1])
local place = KEYS[2] .. ':' .. ARGV[1]
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, 0}
end
if not holder then
  while true do
    local head = redis.call('LINDEX', KEYS[2], 0)
    if not head or head == ARGV[1] then
      if head then
        redis.call('LPOP', KEYS[2])
        redis.call('DEL', place)
      end
      redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
      return {1, 0}
    end
    if redis.call('EXISTS', KEYS[2] .. ':' .. head) == 1 then
      break
    end
    redis.call('LPOP', KEYS[2])
  end
end
if lease == 0 then
  return {0, -1, 1}
end
if not redis.call('SET', place, ARGV[2] .. ':' .. ARGV[4], 'PX', lease, 'GET') then
  redis.call('RPUSH', KEYS[2], ARGV[1])
end
redis.call('PEXPIRE', KEYS[2], lease * 2)
return {0, math.floor(lease / 3), 1}
