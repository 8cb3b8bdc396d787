--[[
  decide_batch(KEYS, ARGV): several decide calls in one, for the decide library (functions/decide.lua). Needs
  `decide` from includes/decide.lua.

  KEYS     the calls' keys, one call after the other
  ARGV[1]  the number of calls
  then per call: its key count, its argument count and its arguments (its ARGV), or -1 and no arguments when
  they are the previous call's (the common case: same rules, cost and clock; only the keys differ)
  (src/store/decide-calls.ts decideBatchArgs lays this out)

  Returns one reply per call, in call order: decide's reply, or the error that call raised (the others still
  decide). Each call runs through `decide` in order, so the batch answers exactly what the calls would one by
  one. Calls without a pinned clock (now override '') are decided at one Redis TIME read once per batch: they
  are decided in the same instant anyway.
]]
--- @include "includes/batch"

local function decide_batch(keys, args)
  local count = tonumber(args[1])
  local replies = {}
  -- The batch's clock: one TIME read, on first need.
  local clock = batch_clock_once()
  local call_args
  local k, a = 0, 1
  for i = 1, count do
    local nk, na = tonumber(args[a + 1]), tonumber(args[a + 2])
    a = a + 2
    local call_keys = {}
    for j = 1, nk do call_keys[j] = keys[k + j] end
    if na < 0 then
      na = 0
    else
      call_args = {}
      for j = 1, na do call_args[j] = args[a + j] end
    end
    pin_clock(call_args, clock)
    k, a = k + nk, a + na
    local ok, reply = pcall(decide, call_keys, call_args)
    replies[i] = batch_reply(ok, reply)
  end
  return replies
end
