-- Counts the permits held in the semaphore KEYS[1] (a sorted set of holders'
-- tokens scored by lease end, server ms) by holders whose lease has not ended.
-- Read-only. Returns {permits, holders}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local used = 0
local holders = 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')) do
  used = used + (tonumber(string.match(m, '^(%d+):')) or 1)
  holders = holders + 1
end
return {used, holders}
