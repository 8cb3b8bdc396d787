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

local BATCH_FORMATS = {}
local function batch_format(n)
  local format = BATCH_FORMATS[n]
  if format == nil then
    format = string.rep('%d,', n - 1) .. '%d'
    BATCH_FORMATS[n] = format
  end
  return format
end

-- The packer's functions are made once per library load and its tables anew per batch: making its closures cost each
-- batch about 12,800 instructions (a batch of one decision: a tenth of its call). An FCALL runs to its end before the
-- next starts, so the batch being packed is the only one. (One local for all of it, `packer`: the decide library's
-- main chunk is near Lua's 200 locals.)
local batch_packer
do
  local packer = {}
  -- A row's numbers as '%d' writes them, kept (fmt.lua kept_values): most are flags, small counts, the batch's clock
  -- and a window's end, the same from row to row and batch to batch, and string.format's nine conversions cost a row
  -- about 11,900 instructions where the kept texts and one concatenation cost a quarter of it.
  packer.texts = kept_values(function(value) return packer.format('%d', value) end)
  function packer.add_error(err)
    local rows, out = packer.rows, packer.out
    rows[#rows + 1] = '!'
    out[#out + 1] = batch_error(err)
  end
  -- decide's reply for one rule: all allowed, now, then the rule's allowed, remaining, reset at, retry after, false
  -- denial, quota remaining and leased.
  function packer.one_row(verdict, now, allowed, remaining, reset_at, retry_after, false_denial, quota, leased)
    local texts, text = packer.texts.values, packer.texts.of
    return (texts[verdict] or text(verdict)) .. ',' .. (texts[now] or text(now)) .. ',' ..
      (texts[allowed] or text(allowed)) .. ',' .. (texts[remaining] or text(remaining)) .. ',' ..
      (texts[reset_at] or text(reset_at)) .. ',' .. (texts[retry_after] or text(retry_after)) .. ',' ..
      (texts[false_denial] or text(false_denial)) .. ',' .. (texts[quota] or text(quota)) .. ',' ..
      (texts[leased] or text(leased))
  end
  function packer.add_row(packed, row)
    if packed then
      local rows = packer.rows
      rows[#rows + 1] = row
    else
      packer.add_error('decide reply not packable: ' .. tostring(row))
    end
  end
  function packer.add(ok, reply)
    if not ok then return packer.add_error(reply) end
    if type(reply) ~= 'table' or #reply == 0 then
      return packer.add_error('decide reply not packable: ' .. type(reply))
    end
    local n = #reply
    if n == 9 then return packer.add_row(pcall(packer.one_row, unpack(reply))) end
    packer.add_row(pcall(packer.format, batch_format(n), unpack(reply)))
  end
  function packer.add_one(ok, verdict, now, allowed, remaining, reset_at, retry_after, false_denial, quota, leased)
    if not ok then return packer.add_error(verdict) end
    packer.add_row(pcall(packer.one_row, verdict, now, allowed, remaining, reset_at, retry_after, false_denial, quota,
      leased))
  end
  function packer.done()
    local out = packer.out
    out[1] = table.concat(packer.rows, ';')
    return out
  end
  batch_packer = function()
    -- (string.format is read per batch: a library's main chunk cannot read the globals while it loads.)
    packer.rows, packer.out, packer.format = {}, { '' }, string.format
    return packer.add, packer.add_one, packer.done
  end
end

--[[
  The batch's clock: batch_clock_once() starts a batch and answers a function that reads Redis TIME once, on first
  need, and answers that reading after, in ms, as a number (decide's now_ms of it is the same number; pin_clock
  writes its text). Made once per library load, like the packer: a batch only resets the reading.
]]
local batch_clock_once
do
  local batch = {}
  function batch.clock()
    local now = batch.now
    if now == nil then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      batch.now = now
    end
    return now
  end
  batch_clock_once = function()
    batch.now = nil
    return batch.clock
  end
end
