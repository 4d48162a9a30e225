-- Counts the permits held in the semaphore KEYS[1] (a sorted set of holders'
-- tokens scored by lease end, server ms) by holders whose lease has not ended.
-- Read-only. Returns {permits, holders}; with ARGV[1] = 'members', the
-- holders' members themselves (several nodes count a holder where a majority
-- of them record it).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
if ARGV[1] == 'members' then
  return live
end
local used = 0
local holders = 0
for _, m in ipairs(live) do
  used = used + (tonumber(string.match(m, '^(%d+):')) or 1)
  holders = holders + 1
end
return {used, holders}
