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

--[[
  The last runs of calls prepared, kept between batches (a Functions library keeps its upvalues from one FCALL to the
  next; an EVAL starts without them): a run whose arguments are the same strings as a kept run's, as a region's
  batches mostly are (the same few rule sets, cost and clock; only the keys differ), takes that prepared call again
  instead of reading its rules and share units and deriving their parameters anew (rule_params, silent_view: memos
  on the rule's table, keyed by what they depend on). What a call changes on its prepared tables is set back first:
  each rule's cost (a local lease changes it for its take) and key, the shard fences (the batch's own memo). At most
  `kept.size` runs, the oldest replaced first.
]]
-- One local for all of it: the library's main chunk is near Lua's 200 locals.
local kept = { runs = {}, next = 1, size = 8 }

-- The kept run whose arguments are the `na` arguments from args[a + 1], string for string; nil when none is.
function kept.find(args, a, na)
  for _, run in ipairs(kept.runs) do
    local held = run.args
    if held.n == na then
      local same = true
      for j = 1, na do
        if held[j] ~= args[a + j] then
          same = false
          break
        end
      end
      if same then return run end
    end
  end
  return nil
end

-- A kept run's call, as prepare_call left it, for a batch with `fences`.
function kept.reuse(run, fences)
  local call = run.call
  call.fences = fences
  call.ctx.fence = 0
  for i, read in ipairs(call.rules) do
    read.rule.cost = run.costs[i]
    read.rule.key, read.rule.hash_read = nil, nil
  end
  return call
end

-- Keeps `call`, prepared from `call_args` (`na` arguments), for the next batches.
function kept.keep(call, call_args, na)
  local costs = {}
  for i, read in ipairs(call.rules) do costs[i] = read.rule.cost end
  call_args.n = na
  kept.runs[kept.next] = { args = call_args, call = call, costs = costs }
  kept.next = kept.next % kept.size + 1
end

local function decide_batch(keys, args)
  local count = tonumber(args[1])
  local add, add_one, done = batch_packer()
  -- The batch's clock: one TIME read, on first need.
  local clock = batch_clock_once()
  -- Each shard's fence, read once per batch (federation.lua shard_fence): the batch is one script call.
  local fences = {}
  -- The current arguments, prepared once for the run of calls that share them (prepare_call).
  local call, prepare_error
  local k, a = 0, 1
  for i = 1, count do
    local nk, na = number_of(args[a + 1]), number_of(args[a + 2])
    a = a + 2
    if na >= 0 then
      call, prepare_error = nil, nil
      local run = kept.find(args, a, na)
      if run ~= nil then
        call = kept.reuse(run, fences)
      else
        local call_args = {}
        for j = 1, na do call_args[j] = args[a + j] end
        local prepared, result = pcall(prepare_call, call_args)
        if prepared then
          call = result
          kept.keep(call, call_args, na)
          call.fences = fences
        else
          prepare_error = result
        end
      end
    end
    a = a + math.max(na, 0)
    local ok, reply
    -- Whether the call's row is in the batch's reply already (decide_silent's values, packed as they are).
    local packed = false
    if call ~= nil then
      -- decide's now_ms, with the batch's one TIME read for a call without a clock of its own.
      local now = call.now_override
      if now == '' then now = clock() else now = tonumber(now) end
      -- A silent candidate's call goes down the silent path first with the two keys that path reads, before its
      -- KEYS are gathered (decide_prepared's first step): most calls end there.
      local tried, fence = false, nil
      if silent_path(call, nk) then
        tried = true
        local verdict, at, allowed, remaining, reset_at, retry_after, false_denial, quota, leased
        ok, verdict, at, allowed, remaining, reset_at, retry_after, false_denial, quota, leased =
          pcall(decide_silent, call, keys[k + 1], keys[k + nk], now)
        if ok and verdict ~= nil then
          -- Decided there: its nine values go into the batch's row without a reply table.
          add_one(true, verdict, at, allowed, remaining, reset_at, retry_after, false_denial, quota, leased)
          packed = true
        else
          -- Not decided there (its second value is the shard's fence it read), or the error it raised.
          reply, fence = verdict, at
        end
      end
      if not packed and (not tried or ok) then
        local call_keys = {}
        for j = 1, nk do call_keys[j] = keys[k + j] end
        ok, reply = pcall(decide_call, call, call_keys, now, tried, fence)
      end
    else
      -- Arguments decide would refuse: every call of the run answers its error.
      ok, reply = false, prepare_error
    end
    k = k + nk
    if not packed then add(ok, reply) end
  end
  return done()
end
