--[[
  Shared by the decide batch functions (decide_batch.lua, decide_single_batch.lua): a call's error answered in
  its place, and the batch's one Redis TIME read.
]]
--- @include "includes/read_rule"

-- A call's error as the reply in its place (pcall gives a table with err for a Redis error, else a message).
local function batch_error(reply)
  if type(reply) == 'table' and reply.err then return redis.error_reply(reply.err) end
  return redis.error_reply(tostring(reply))
end

-- A call's reply in its place: the reply when the call ran (pcall's ok), else its error.
local function batch_reply(ok, reply)
  if ok then return reply end
  return batch_error(reply)
end

-- Redis TIME in ms, as the text decide's now_ms reads (the now override).
local function batch_clock()
  local t = redis.call('TIME')
  return tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end

-- The batch's clock: a function that reads Redis TIME once, on first need, and answers that reading after.
local function batch_clock_once()
  local batch_now
  return function()
    if batch_now == nil then batch_now = batch_clock() end
    return batch_now
  end
end
