-- Deletes each key in KEYS that still holds token ARGV[1]; never touches a key
-- held by anyone else. Unless ARGV[2] is empty, each deleted key's release is
-- announced on the channel ARGV[2] .. key with the token as the message, which
-- wakes whoever waits for it; pcall, because an ACL user without channel rights
-- must still be able to release. Returns how many keys were deleted.
local deleted = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    deleted = deleted + redis.call('DEL', KEYS[i])
    if ARGV[2] ~= '' then
      redis.pcall('PUBLISH', ARGV[2] .. KEYS[i], ARGV[1])
    end
  end
end
return deleted
