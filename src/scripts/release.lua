-- Deletes each key in KEYS that still holds token ARGV[1]; never touches a key
-- held by anyone else. Unless ARGV[2] is empty, each deleted key's release is
-- announced on the channel ARGV[2] .. key with the token as the message, which
-- wakes whoever waits for it; pcall, because an ACL user without channel rights
-- must still be able to release. A semaphore's key (a sorted set of holders'
-- tokens) loses only this holder's member (released only if its lease had not
-- ended), and its release is announced once
-- per permit freed ("<permits>:<uuid>" tokens), each notice waking one waiter
-- (at most 64: a read-write lock's writer holds every permit).
-- ARGV[3], when given, is the longest lease in ms a key may still have to be
-- deleted (the cleanup of a lock that lapsed: a longer one was continued by
-- whoever adopted the token, and is theirs).
-- Returns how many keys were released; when some notice reached more than one
-- client (others listen besides the releasing client), {that count, the most
-- clients any one notice reached}.
local deleted = 0
local heard = 0
local longest = tonumber(ARGV[3])
for i = 1, #KEYS do
  local v = redis.pcall('GET', KEYS[i])
  if type(v) == 'table' and v.err then
    local score = redis.pcall('ZSCORE', KEYS[i], ARGV[1])
    if type(score) == 'string' then
      local t = redis.call('TIME')
      local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      -- A member whose lease ended was no longer a holder: removed, not released;
      -- one with more than ARGV[3] left is whoever continued the token's.
      if (not longest or tonumber(score) - now <= longest)
          and redis.call('ZREM', KEYS[i], ARGV[1]) == 1 and tonumber(score) > now then
        deleted = deleted + 1
        if ARGV[2] ~= '' then
          local permits = tonumber(string.match(ARGV[1], '^(%d+):')) or 1
          for p = 1, math.min(permits, 64) do
            local n = redis.pcall('PUBLISH', ARGV[2] .. KEYS[i], ARGV[1] .. '#' .. p)
            if type(n) == 'number' and n > heard then
              heard = n
            end
          end
        end
      end
    end
  elseif v == ARGV[1] and (not longest or redis.call('PTTL', KEYS[i]) <= longest) then
    deleted = deleted + redis.call('DEL', KEYS[i])
    if ARGV[2] ~= '' then
      local n = redis.pcall('PUBLISH', ARGV[2] .. KEYS[i], ARGV[1])
      if type(n) == 'number' and n > heard then
        heard = n
      end
    end
  end
end
if heard > 1 then
  return {deleted, heard}
end
return deleted
