#!lua name=quotafed_{hash}
--[[
  decide.lua as a Redis Functions library (FUNCTION LOAD, then FCALL): the includes' functions are created once
  at load instead of on every EVALSHA. src/store/library.ts loads it with {hash} replaced by a hash of this
  source (includes expanded), so two quotafed versions sharing a Redis each call their own code.

  qf_decide_{hash}        decide.lua's call: KEYS, ARGV and reply as lua/decide.lua documents them
  qf_decide_batch_{hash}  several decide calls in one FCALL, decided in order (includes/decide_batch.lua)
]]
--- @include "includes/decide"

-- A library keeps its upvalues between calls, an EVAL starts with fresh ones: every call renews
-- federation.lua's memos first, so it decides exactly what decide.lua would.
local decide_fresh = decide
local function decide(KEYS, ARGV)
  renew_memos()
  return decide_fresh(KEYS, ARGV)
end
local function decide_call(call, KEYS, now, tried, fence)
  renew_memos()
  return decide_prepared(call, KEYS, now, tried, fence)
end

--- @include "includes/decide_batch"

redis.register_function('qf_decide_{hash}', decide)
redis.register_function('qf_decide_batch_{hash}', decide_batch)
