-- Takes every key in KEYS for token ARGV[1] with a TTL of ARGV[2] ms: all or nothing.
-- A key already holding this token counts as ours, so a retried attempt whose
-- first try landed (but whose reply was lost) still succeeds and leaves no ghost.
-- Returns {1} when taken, or {0, pttl, i} when KEYS[i] is held by another token.
for i = 1, #KEYS do
  local holder = redis.call('GET', KEYS[i])
  if holder and holder ~= ARGV[1] then
    return {0, redis.call('PTTL', KEYS[i]), i}
  end
end
for i = 1, #KEYS do
  if not redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
return {1}
