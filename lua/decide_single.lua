--[[
  decide.lua for a region that does not federate (one region, or no federation section): the same call and
  reply, the same window state without federation cells, fences, rebalancing or pending sets, and a token bucket
  as one number (includes/gcra.lua, the state decide.lua's one-region path also keeps). The engine chooses
  it when its topology has one region (src/engine/redis-engine.ts); decide.lua stays the only federated path.

  KEYS[1]          shard marker qf:{s<n>}:m (unused here; kept so both scripts take the same call)
  KEYS[2 ..]       one state key per rule, in ARGV order

  ARGV[1]  self index (0)  ARGV[2] region count (1)  ARGV[3] share units csv (unused)
  ARGV[4]  max clock skew ms                          ARGV[5] rule count m
  ARGV[6]  now override in ms ('' = Redis TIME)
  then 10 values per rule: algorithm (tb|fw|sw|sl|cc), limit, period ms, burst, cost,
  leakage budget (unused), lease ttl ms, lease id, shadow (1|0), local lease ask (0 = none)
  (read through includes/read_rule.lua)

  Returns { all_allowed, now, then per rule: allowed, remaining, reset_at_ms, retry_after_ms, false_denial,
  quota_remaining, leased }
  (false_denial 1|0: docs/federation.md §4, always 0 here; quota_remaining: decide.lua's field, here always
  remaining: one region is an exact limiter; leased: units taken for a local lease, includes/local_lease.lua)
]]
--- @include "includes/decide_single"

return decide(KEYS, ARGV)
