--[[
  The sync loop's sweep over one shard's watch set (protocol.ts sweepWindow / sweepBucket): each watched key
  whose view still shows a hungry peer is rebalanced in its current window (epoch) without new gossip; a key
  with no hungry peer (or no state) leaves the set. A starved peer's true denials change nothing and send nothing,
  so without this a giver that went idle after the peer's last message would never notice it.

  KEYS[1] watch set qf:{s<n>}:w   KEYS[2] shard marker qf:{s<n>}:m
  KEYS[3] the shard's bell qf:{s<n>}:b (rung when a rebalance queued a key: includes/bell.lua)
  KEYS[4 .. p+3]   pending ZSETs of the p = n - 1 peers
  KEYS[p+4 ..]     the watched state keys to sweep, in ARGV order

  ARGV[1] self index   ARGV[2] region count n   ARGV[3] share units csv   ARGV[4] max clock skew ms
  ARGV[5..9] REBALANCE: hunger fraction, reserve fraction, give fraction, min surplus, idle ms
  ARGV[10] now override ('' = TIME)   ARGV[11] key count m
  ARGV[12] stranded horizon ms (the sync interval: the time until the next sweep)
  then 5 values per key: algorithm (tb|fw|sw), limit, period ms, burst, leakage budget (-1 = unbounded)

  Returns { keys rebalanced, keys that left the watch set, { stranded per key }, quiet for ms }: a window key still
  watched (a peer is hungry) whose window ends before the next sweep reports this region's unused allowance in it
  (l_r - c_r), the allowance stranded at window end; 0 otherwise (token buckets carry tokens across epochs). Quiet
  for: how long a sweep of these keys changes nothing unless a merge changes one of them (which rings the watch
  lane): the least of the idle holders' spans (protocol.ts bucketSweepIdleUntil), 0 when a key needs the next
  round's sweep.
]]
--- @include "includes/sweep_watch"

return sweep_watch(KEYS, ARGV)
