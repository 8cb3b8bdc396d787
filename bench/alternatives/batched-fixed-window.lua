--[[
  Bench-only alternative (not used by the service): many single-region fixed-window decisions in one script
  call, so concurrent decisions share one command (one encode, one parse, one script invocation).
  Same state layout as lua/includes/fixed_window.lua (w<k>, c<k>.0). Each decision is still atomic: the
  whole script is.
  KEYS     one state key per decision
  ARGV[1]  limit   ARGV[2] period ms   ARGV[3] cost
  Returns  { now, then per decision: allowed (1|0), remaining }
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit, period, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local id = math.floor(now / period)
local k = id % 3
local w, c = 'w' .. k, 'c' .. k .. '.0'
local ttl = 2 * period + 1000
local reply = { now }
for i = 1, #KEYS do
  local held = redis.call('HMGET', KEYS[i], w, c)
  local count = 0
  if tonumber(held[1]) == id then count = tonumber(held[2]) or 0 end
  if count + cost > limit then
    reply[#reply + 1] = 0
    reply[#reply + 1] = math.max(0, limit - count)
  else
    redis.call('HSET', KEYS[i], w, id, c, count + cost)
    redis.call('PEXPIRE', KEYS[i], ttl)
    reply[#reply + 1] = 1
    reply[#reply + 1] = limit - count - cost
  end
end
return reply
