#!lua name=quotafed_gossip_{hash}
--[[
  apply_gossip.lua and sweep_watch.lua as a Redis Functions library (FUNCTION LOAD, then FCALL): the includes'
  functions, and the field plans federation.lua caches by state shape, are created once instead of on every EVALSHA
  (Redis µs per apply: bench/apply-gossip-time.ts). src/store/library.ts loads it with {hash} replaced by a hash of
  this source.

  qf_apply_gossip_{hash}  apply_gossip.lua's call: KEYS, ARGV and reply as lua/apply_gossip.lua documents them
  qf_apply_job_{hash}     one gossip job: replay check, every entry's merge, replay record and heard mark
                          (includes/apply_job.lua)
  qf_sweep_watch_{hash}   sweep_watch.lua's call: KEYS, ARGV and reply as lua/sweep_watch.lua documents them
]]
--- @include "includes/apply_gossip"
--- @include "includes/apply_job"
--- @include "includes/sweep_watch"

-- A library keeps its upvalues between calls, an EVAL starts with fresh ones: every call renews
-- federation.lua's memos first, so it merges (sweeps) exactly what apply_gossip.lua (sweep_watch.lua) would.
local apply_fresh = apply_gossip
local function apply(KEYS, ARGV)
  renew_memos()
  return apply_fresh(KEYS, ARGV)
end

local sweep_fresh = sweep_watch
local function sweep(KEYS, ARGV)
  renew_memos()
  return sweep_fresh(KEYS, ARGV)
end

redis.register_function('qf_apply_gossip_{hash}', apply)
redis.register_function('qf_sweep_watch_{hash}', sweep)
redis.register_function('qf_apply_job_{hash}', apply_job)
