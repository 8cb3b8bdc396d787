--[[
  decide_batch(KEYS, ARGV): several decide calls in one, for the decide library (functions/decide.lua). Needs
  `decide` from includes/decide.lua.

  KEYS     the calls' keys, one call after the other
  ARGV[1]  the number of calls
  then per call: its key count, its argument count and its arguments (its ARGV), or -1 and no arguments when
  they are the previous call's (the common case: same rules, cost and clock; only the keys differ)
  (src/store/decide-calls.ts decideBatchArgs lays this out)

  Returns one reply per call, in call order, packed in one text (batch.lua batch_packer: decide's reply as a row of
  its integers, or the error that call raised, the others still deciding). Each call runs through decide's own
  steps in order (its arguments read once for a run of calls that share them; a silent candidate's call tried on
  the silent path with its marker and state key before its KEYS are gathered; decide_prepared then sets each call's
  keys and fence, each shard's marker read once per batch), so the batch answers exactly what the calls would one
  by one. Calls without a pinned clock (now override '') are decided
  at one Redis TIME read once per batch: they are decided in the same instant anyway.
]]
--- @include "includes/batch"

local function decide_batch(keys, args)
  local count = tonumber(args[1])
  local add, _, done = batch_packer()
  -- The batch's clock: one TIME read, on first need.
  local clock = batch_clock_once()
  -- Each shard's fence, read once per batch (federation.lua shard_fence): the batch is one script call.
  local fences = {}
  -- The current arguments, prepared once for the run of calls that share them (prepare_call).
  local call, prepare_error
  local k, a = 0, 1
  for i = 1, count do
    local nk, na = tonumber(args[a + 1]), tonumber(args[a + 2])
    a = a + 2
    if na >= 0 then
      local call_args = {}
      for j = 1, na do call_args[j] = args[a + j] end
      local prepared, result = pcall(prepare_call, call_args)
      call, prepare_error = nil, nil
      if prepared then
        call = result
        call.fences = fences
      else
        prepare_error = result
      end
    end
    a = a + math.max(na, 0)
    local ok, reply
    if call ~= nil then
      -- decide's now_ms, with the batch's one TIME read for a call without a clock of its own.
      local now = call.now_override
      if now == '' then now = clock() end
      now = tonumber(now)
      -- A silent candidate's call goes down the silent path first with the two keys that path reads, before its
      -- KEYS are gathered (decide_prepared's first step): most calls end there.
      local tried, fence = false, nil
      if silent_path(call, nk) then
        tried = true
        ok, reply, fence = pcall(decide_silent, call, keys[k + 1], keys[k + nk], now)
      end
      if not tried or (ok and reply == nil) then
        local call_keys = {}
        for j = 1, nk do call_keys[j] = keys[k + j] end
        ok, reply = pcall(decide_call, call, call_keys, now, tried, fence)
      end
    else
      -- Arguments decide would refuse: every call of the run answers its error.
      ok, reply = false, prepare_error
    end
    k = k + nk
    add(ok, reply)
  end
  return done()
end
