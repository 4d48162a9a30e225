-- Put before the scripts that hand out fencing tokens. The next fence of
-- counter `key`: a counter that is missing (never used, deleted, or lost with
-- a server restarted without its data) starts again from the server's clock
-- in microseconds, above every fence handed out before as long as the clock
-- did not step back across the restart and fewer than a million fences a
-- second were handed out since the counter began. (Returned as a Lua number:
-- exact as a reply, but concatenated it prints in exponent form; read the
-- counter back with GET for text.)
local function next_fence(key)
  if redis.call('EXISTS', key) == 0 then
    local t = redis.call('TIME')
    redis.call('SET', key, t[1] .. string.format('%06d', tonumber(t[2])))
  end
  return redis.call('INCR', key)
end
