--[[
  Bench-only alternative (not used by the service): the single-region fixed window with the fewest Redis
  calls, the same state layout as lua/includes/fixed_window.lua (w<k>, c<k>.<self>) and the same reply shape
  for one rule. It bounds what a specialised fast path in decide.lua could reach.
  KEYS[1] state key   ARGV[1] limit   ARGV[2] period ms   ARGV[3] cost
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit, period, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local id = math.floor(now / period)
local k = id % 3
local w, c = 'w' .. k, 'c' .. k .. '.0'
local held = redis.call('HMGET', KEYS[1], w, c)
local count = 0
if tonumber(held[1]) == id then count = tonumber(held[2]) or 0 end
local reset_at = (id + 1) * period
if count + cost > limit then
  return { 0, now, 0, math.max(0, limit - count), reset_at, math.max(1, reset_at - now) }
end
redis.call('HSET', KEYS[1], w, id, c, count + cost)
redis.call('PEXPIRE', KEYS[1], 2 * period + 1000)
return { 1, now, 1, limit - count - cost, reset_at, 0 }
