--[[
  Time comes from Redis, so gateways with skewed clocks agree.
  now_ms(override): milliseconds since the epoch from TIME, or the override when a test pins the clock.
]]
local function now_ms(override)
  if override ~= nil and override ~= '' then return tonumber(override) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
