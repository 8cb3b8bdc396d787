--[[
  Merge one key's state from a peer's gossip (protocol.ts mergeWindow / mergeBucket): a cell-wise max of
  cumulative counters, so duplicated, reordered or replayed gossip changes nothing twice; then move unused
  allowance (share) to hungry regions in the changed windows. A key whose view shows a hungry peer after the
  merge joins the shard's watch set, which the sync loop sweeps (sweep_watch.lua).

  KEYS[1] the state key   KEYS[2] shard marker qf:{s<n>}:m   KEYS[3] watch set qf:{s<n>}:w
  KEYS[4] fast-lane set qf:{s<n>}:f (a merge that granted allowance puts the key there: sent to peers now)
  KEYS[5] the shard's bell qf:{s<n>}:b (rung when the merge queued the key: includes/bell.lua)
  KEYS[6 .. p+5]   pending ZSETs of the p peers (each ends in :p:<peer index>)

  ARGV[1] self index   ARGV[2] region count n   ARGV[3] share units csv   ARGV[4] max clock skew ms
  ARGV[5] algorithm (tb|fw|sw)   ARGV[6] limit   ARGV[7] period ms   ARGV[8] burst
  ARGV[9] leakage budget (-1 = unbounded)
  ARGV[10..14] REBALANCE: hunger fraction, reserve fraction, give fraction, min surplus, idle ms
  ARGV[15] sender index   ARGV[16] now override ('' = TIME)   ARGV[17] sender's change time ms
  ARGV[18] slot count, then per slot: id, n values c[o], n·n values x[o][d], n·n values a[o][d] (token
  buckets: y[o][d], tokens moved), n values t[o]

  Who a changed merge marks the key for (protocol.ts marksOfMerge, marksPeer): the peers this region gave to in it
  (granteesOf: a grant or a return), and every peer when it gave while it admits in the key itself (admitsIn; an
  idle donor's grant is not passed on); besides, the sender when its view of this region's own row (c, t, x) is
  behind (protocol.ts ownRowAhead: a silent count, or a grant it has not merged, reaches the peer that is talking
  about the key), and each other peer the entry brought more than what the sender sends it itself and what it wrote
  itself (protocol.ts relayTargets, relayWorthy: a third region's cells, a window's transfer or acknowledgement; not
  the sender's own count and time, nor a token bucket sender's own transfers and tokens moved, nor the peer's own
  row). A merge that marks nobody leaves this region's acknowledgements (windows' a row, never read by a decision)
  to its next change.

  Returns { changed (1|0), lag ms (now - sender's change time), granted (1|0: this region gave in the merge), lanes
  (the bell's mask of the lanes the merge gave the publisher work in, includes/bell.lua; -1 every lane, 0 none) }
  An entry whose sender's change time is not after the key's reset mark r (reset_key.lua) + the max clock skew
  changes nothing: it is what an operator's reset forgot.
]]
--- @include "includes/apply_gossip"

return apply_gossip(KEYS, ARGV)
