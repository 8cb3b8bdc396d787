--[[
  Decide one request against every rule that matches it, atomically, in one round trip.
  A request denied by any enforcing rule consumes from none.

  KEYS[1]          shard marker qf:{s<n>}:m (recovery fence; same slot as the rule keys)
  KEYS[2 .. p+1]   pending ZSETs of the p peers, qf:{s<n>}:p:<peer index>
  KEYS[p+2]        federated only (n > 1): the fast-lane set qf:{s<n>}:f (keys to send to the peers now)
  KEYS[p+3]        federated only (n > 1): the shard's bell qf:{s<n>}:b (rung when the call queued a key:
                   includes/bell.lua)
  KEYS[p+4 ..]     (n = 1: KEYS[2 ..]) one state key per rule, in ARGV order

  ARGV[1]  self index     ARGV[2] region count n     ARGV[3] share units csv (protocol.ts shareUnits)
  ARGV[4]  max clock skew ms                          ARGV[5] rule count m
  ARGV[6]  now override in ms ('' = Redis TIME)
  then 10 values per rule: algorithm (tb|fw|sw|sl|cc), limit, period ms, burst, cost,
  leakage budget (-1 = unbounded; protocol.ts resolveBudget), lease ttl ms, lease id, shadow (1|0),
  local lease ask (units to take beyond cost once admitted, includes/local_lease.lua; 0 = none)
  then the gossip horizon H in ms (protocol admission-gossip.ts gossipHorizonMs)
  (read through includes/read_rule.lua)

  A federated admission marks the key for the peers (pending sets, fast lane) only when it is loud
  (includes/admission_gossip.lua): a key far below this region's share sends nothing.

  Returns { all_allowed, now, then per rule: allowed, remaining, reset_at_ms, retry_after_ms, false_denial,
  quota_remaining, leased }
  (remaining: what this region can still admit, after this request when allowed; false_denial 1|0:
  docs/federation.md §4, always 0 in decide_single.lua; quota_remaining: the federation's remaining quota as
  this region's view has it, never below remaining, protocol.ts windowQuotaRemaining / bucketQuotaRemaining,
  remaining itself for a rule that does not federate; docs/federation.md §3a; leased: the units taken for a
  local lease beyond the request's cost, includes/local_lease.lua)
]]
--- @include "includes/decide"

return decide(KEYS, ARGV)
