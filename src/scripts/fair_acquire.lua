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
-- KEYS[3], when given (fencing), is the key's fence counter: taking the key
-- increments it, and the place reads "<ttl>:<n>:f" so that a release handing
-- the key to this waiter increments it too.
-- A key already holding this token counts as ours (handed over, or a retried
-- attempt whose reply was lost): its TTL is re-armed, and its fence is the
-- counter as it stands (the hand-off or the lost try counted it already).
-- Returns {1, fence} when taken (fence 0 without fencing), or {0, ms, 1} while
-- waiting: the next attempt is due within ms (a third of the place's lease)
-- unless a hand-off comes first.
local lease = tonumber(ARGV[3])
local fence = KEYS[3]
local holder = redis.call('GET', KEYS[1])
local place = KEYS[2] .. ':' .. ARGV[1]
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if not fence then
    return {1, 0}
  end
  -- (A counter deleted meanwhile starts again rather than answer 0.)
  return {1, tonumber(redis.call('GET', fence)) or next_fence(fence)}
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
      if not fence then
        return {1, 0}
      end
      return {1, next_fence(fence)}
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
local wants = ARGV[2] .. ':' .. ARGV[4]
if fence then
  wants = wants .. ':f'
end
if not redis.call('SET', place, wants, 'PX', lease, 'GET') then
  redis.call('RPUSH', KEYS[2], ARGV[1])
end
redis.call('PEXPIRE', KEYS[2], lease * 2)
return {0, math.floor(lease / 3), 1}
