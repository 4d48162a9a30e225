-- Releases a fair lock: if KEYS[1] still holds token ARGV[1], hands it to the
-- first waiter in the line KEYS[2] whose place (KEYS[2] .. ':' .. token, see
-- fair_acquire.lua) is still leased: SET to that waiter's token with the TTL
-- its place holds, announced on the channel ARGV[2] .. KEYS[1] as
-- '>' .. token .. ' ' .. the number of the attempt that last renewed the place,
-- so that waiter is woken already holding the lock (and knows the hand-off
-- came after that attempt, and before any later one). A waiter whose place
-- asks for a fence (fencing: "<ttl>:<n>:f") gets the next value of the key's
-- fence counter KEYS[3] with the key, announced as a third word
-- ('>' .. token .. ' ' .. n .. ' ' .. fence). With nobody
-- waiting the key is deleted and the release announced with the token, as
-- for a plain lock. No announcement when ARGV[2] is empty (a cluster); pcall,
-- because an ACL user without channel rights must still be able to release.
-- With ARGV[3] = '1' a caller that does not hold the key leaves the line
-- instead (a waiter that stopped waiting). ARGV[4], when given, is the
-- longest lease in ms the key may still have to be released (the cleanup of
-- a lock that lapsed: a longer one was continued by whoever adopted the
-- token, and is theirs). Returns 1 when released.
local function announce(message)
  if ARGV[2] ~= '' then
    redis.pcall('PUBLISH', ARGV[2] .. KEYS[1], message)
  end
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  if ARGV[3] == '1' then
    redis.call('LREM', KEYS[2], 0, ARGV[1])
    redis.call('DEL', KEYS[2] .. ':' .. ARGV[1])
  end
  return 0
end
local longest = tonumber(ARGV[4])
if longest and redis.call('PTTL', KEYS[1]) > longest then
  return 0
end
while true do
  local next = redis.call('LPOP', KEYS[2])
  if not next then
    break
  end
  local place = redis.call('GETDEL', KEYS[2] .. ':' .. next)
  if place then
    local ttl, n, fenced = string.match(place, '^(%d+):?(%d*):?(f?)$')
    if ttl then
      redis.call('SET', KEYS[1], next, 'PX', ttl)
      if fenced == 'f' then
        -- (Read back as the counter's text: a Lua number of 16 digits would
        -- print in exponent form.)
        next_fence(KEYS[3])
        announce('>' .. next .. ' ' .. n .. ' ' .. redis.call('GET', KEYS[3]))
      else
        announce('>' .. next .. ' ' .. n)
      end
      return 1
    end
  end
end
redis.call('DEL', KEYS[1])
announce(ARGV[1])
return 1
