--[[
  What a gossip lane reads of a key to send it (take_fast.lua, take_pending.lua, apply_job.lua's hand-over): its
  fields as HGETALL answers them, { field, value, ... }. A key that expired comes back with no fields, and so does a
  key that is a string now (it expired and came back silent: silent_string.lua; it has nothing to send).
]]
local function sent_state(key)
  local fields = redis.pcall('HGETALL', key)
  if fields.err then return {} end
  return fields
end
