-- Deletes each key in KEYS that still holds token ARGV[1]; never touches a key
-- held by anyone else. Returns how many keys were deleted.
local deleted = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    deleted = deleted + redis.call('DEL', KEYS[i])
  end
end
return deleted
