-- Takes the first ARGV[3] keys of KEYS for token ARGV[1] with a TTL of ARGV[2] ms:
-- all or nothing. Any further KEYS are the fence counters of those keys (fencing
-- on), each incremented once the lock is taken.
-- A key already holding this token counts as ours, so a retried attempt whose
-- first try landed (but whose reply was lost) still succeeds and leaves no ghost.
-- Returns {1, fence} when taken (fence 0 without fencing), or {0, pttl, i} when
-- KEYS[i] is held by another token.
local n = tonumber(ARGV[3])
for i = 1, n do
  local holder = redis.call('GET', KEYS[i])
  if holder and holder ~= ARGV[1] then
    return {0, redis.call('PTTL', KEYS[i]), i}
  end
end
for i = 1, n do
  if not redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
local fence = 0
for i = #KEYS, n + 1, -1 do
  fence = next_fence(KEYS[i])
end
return {1, fence}
