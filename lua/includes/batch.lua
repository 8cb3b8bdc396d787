--[[
  Shared by the decide batch functions (decide_batch.lua, decide_single_batch.lua): a call's error answered in
  its place, and the batch's one Redis TIME read.
]]
--- @include "includes/read_rule"
--- @include "includes/fmt"

-- A call's error as the reply in its place (pcall gives a table with err for a Redis error, else a message).
local function batch_error(reply)
  if type(reply) == 'table' and reply.err then return redis.error_reply(reply.err) end
  return redis.error_reply(tostring(reply))
end

--[[
  The batch's reply, packed (one text for every call's numbers, so the client decodes one bulk string instead of a
  nested array of integers per call: src/store/decide-calls.ts unpackBatchReply):
    [1]  the calls' rows in call order, separated by ';'. A row is its call's reply, the integers Redis would have
         sent for it, separated by ','; the row '!' stands for a call that raised.
    [2…] the errors of the '!' rows, in call order.
  A row's numbers are written with '%d', which truncates toward zero as Redis turns a Lua number into an integer
  reply, so a row reads exactly what the nested reply read. (docs/performance.md, hot path, fifteenth pass.)
  batch_packer() answers add(ok, reply), add_one(ok, ...) (one rule's nine numbers, as pcall of a function that
  answers them returns them: single_region.lua's paths) and done(), the reply; add or add_one is called once per
  call, in call order.
]]

-- A number as a reply row writes it (batch_packer).
local function int_text(value)
  return string.format('%d', value)
end

local BATCH_FORMATS = {}
local function batch_format(n)
  local format = BATCH_FORMATS[n]
  if format == nil then
    format = string.rep('%d,', n - 1) .. '%d'
    BATCH_FORMATS[n] = format
  end
  return format
end

local function batch_packer()
  local rows, out = {}, { '' }
  local format, unpack = string.format, unpack
  -- The rows repeat the batch's clock and, for a window, the window's end (a 13-digit number costs sprintf more than
  -- the rest of its row): their texts are kept from row to row.
  local now_text, reset_text = last_text(int_text), last_text(int_text)
  local function add_error(err)
    rows[#rows + 1] = '!'
    out[#out + 1] = batch_error(err)
  end
  -- decide's reply for one rule: all allowed, now, then the rule's allowed, remaining, reset at, retry after, false
  -- denial, quota remaining and leased.
  local function one_row(verdict, now, allowed, remaining, reset_at, retry_after, false_denial, quota, leased)
    return format('%d,%s,%d,%d,%s,%d,%d,%d,%d', verdict, now_text(now), allowed, remaining, reset_text(reset_at),
      retry_after, false_denial, quota, leased)
  end
  local function add_row(packed, row)
    if packed then rows[#rows + 1] = row else add_error('decide reply not packable: ' .. tostring(row)) end
  end
  local function add(ok, reply)
    if not ok then return add_error(reply) end
    if type(reply) ~= 'table' or #reply == 0 then return add_error('decide reply not packable: ' .. type(reply)) end
    local n = #reply
    if n == 9 then return add_row(pcall(one_row, unpack(reply))) end
    add_row(pcall(format, batch_format(n), unpack(reply)))
  end
  local function add_one(ok, verdict, now, allowed, remaining, reset_at, retry_after, false_denial, quota, leased)
    if not ok then return add_error(verdict) end
    add_row(pcall(one_row, verdict, now, allowed, remaining, reset_at, retry_after, false_denial, quota, leased))
  end
  local function done()
    out[1] = table.concat(rows, ';')
    return out
  end
  return add, add_one, done
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
