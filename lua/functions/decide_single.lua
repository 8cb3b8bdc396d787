#!lua name=quotafed_single_{hash}
--[[
  decide_single.lua as a Redis Functions library (FUNCTION LOAD, then FCALL): the includes' functions are
  created once at load instead of on every EVALSHA. src/store/library.ts loads it with {hash} replaced by a
  hash of this source (includes expanded), so two quotafed versions sharing a Redis each call their own code.

  qf_decide_single_{hash}        decide_single.lua's call: KEYS, ARGV and reply as lua/decide_single.lua
                                 documents them
  qf_decide_batch_single_{hash}  several decide calls in one FCALL, decided in order
                                 (includes/decide_single_batch.lua)
]]
--- @include "includes/decide_single"
--- @include "includes/decide_single_batch"

redis.register_function('qf_decide_single_{hash}', decide)
redis.register_function('qf_decide_batch_single_{hash}', decide_batch)
