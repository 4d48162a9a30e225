-- Sets a TTL of ARGV[2] ms on every key in KEYS, only if all of them still hold
-- token ARGV[1]. Never creates a key: a missing or foreign value means the lock
-- is lost. Returns 1 when extended, 0 when the lock is no longer held.
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
