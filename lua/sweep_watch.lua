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

  Returns { keys rebalanced, keys that left the watch set, { stranded per key } }: a window key still watched
  (a peer is hungry) whose window ends before the next sweep reports this region's unused allowance in it
  (l_r - c_r), the allowance stranded at window end; 0 otherwise (token buckets carry tokens across epochs).
]]
--- @include "includes/clock"
--- @include "includes/federation"
--- @include "includes/rebalance"
--- @include "includes/window_decide"
--- @include "includes/window_rebalance"
--- @include "includes/bucket_share"
--- @include "includes/bucket_rebalance"
--- @include "includes/bell"

local watch = KEYS[1]
local n = tonumber(ARGV[2])
local now = now_ms(ARGV[10])
local ctx = {
  n = n, self = tonumber(ARGV[1]), units = parse_units(ARGV[3], n), skew = tonumber(ARGV[4]),
  policy = parse_policy(ARGV, 5),
}
local pending = {}
for i = 4, n + 2 do pending[#pending + 1] = KEYS[i] end
local fence = shard_fence(KEYS[2], now)

local horizon = tonumber(ARGV[12])
local rebalanced, left = 0, 0
local stranded = {}
for i = 1, tonumber(ARGV[11]) do
  local key = KEYS[n + 2 + i]
  local base = 12 + (i - 1) * 5
  stranded[i] = 0
  local p = rule_params(ctx, tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4]), tonumber(ARGV[base + 5]))
  local changed = false
  local watched = false
  if ARGV[base + 1] == 'tb' then
    if bucket_sweep_idle(p, key, now) then
      -- An active holder of its idle peers' share (protocol.ts bucketSweepIdle): nothing to do until it falls
      -- quiet, a peer admits or the epoch's end nears, and it stays watched; a few fields read, not the key.
      watched = true
    else
      local state, bucket = load_bucket(p, key, false, now)
      if bucket ~= nil and bucket_has_hungry_peer(p, bucket.slots, now) then
        watched = true
        local swept
        changed, swept = sweep_bucket(p, bucket, fence, now)
        if changed then store_bucket(p, state, swept) end
      end
    end
  else
    local read, state = pcall(load_state, key, n, true, {})
    if not read then
      -- A window's silent string (silent_string.lua: the key expired and came back silent): its hash.
      if not silent_string_to_hash(key) then error(state) end
      state = load_state(key, n, true, {})
    end
    if window_has_hungry_peer(p, state.slots, now) then
      watched = true
      changed = sweep_window(p, state.slots, fence, now)
      if changed then
        store_slots(state, state.slots)
        redis.call('PEXPIRE', key, window_ttl(p))
      end
      local id = math.floor(now / p.period)
      if not p.unbounded and (id + 1) * p.period - now <= horizon then
        local slot = cells_of(state.slots, id, n, true)
        stranded[i] = math.max(0, window_allowance(p, slot, ctx.self, id) - slot.c[ctx.self])
      end
    end
  end
  if not watched then
    left = left + redis.call('SREM', watch, key)
  elseif changed then
    rebalanced = rebalanced + 1
    -- A transfer is in the hash now: never silent again (federation.lua load_silent).
    redis.call('HDEL', key, 'z')
    mark_changed(key, pending, now)
  end
end
if rebalanced > 0 then ring_bell(KEYS[3]) end
return { rebalanced, left, stranded }
