-- Undoes one attempt at a semaphore on several nodes (see sem_slots.lua):
-- removes from KEYS[1] every member the attempt ARGV[1] ("<permits>:*:<uuid>")
-- wrote, whatever slots it names, except ARGV[2] (the member the attempt won
-- with; '' for none). Unless ARGV[3] is empty, each removed holder whose lease
-- had not ended is announced on the channel ARGV[3] .. KEYS[1] once per permit
-- freed (at most 64), as a release is. Returns how many members were removed.
local uuid = string.match(ARGV[1], '^%d+:%*:(.+)$')
if not uuid then
  return 0
end
local suffix = ':' .. uuid
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local removed = 0
local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  local m = all[i]
  if m ~= ARGV[2] and string.sub(m, -#suffix) == suffix then
    redis.call('ZREM', KEYS[1], m)
    removed = removed + 1
    if ARGV[3] ~= '' and tonumber(all[i + 1]) > now then
      local permits = tonumber(string.match(m, '^(%d+):')) or 1
      for p = 1, math.min(permits, 64) do
        redis.pcall('PUBLISH', ARGV[3] .. KEYS[1], m .. '#' .. p)
      end
    end
  end
end
return removed
