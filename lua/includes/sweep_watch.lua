--[[
  sweep_watch.lua's body as a function of its KEYS and ARGV (the script and the gossip Functions library,
  lua/functions/gossip.lua, both call it). KEYS, ARGV and the reply: lua/sweep_watch.lua.
]]
--- @include "includes/clock"
--- @include "includes/federation"
--- @include "includes/rebalance"
--- @include "includes/window_decide"
--- @include "includes/window_rebalance"
--- @include "includes/bucket_share"
--- @include "includes/bucket_rebalance"
--- @include "includes/bell"

local function sweep_watch(KEYS, ARGV)
  local watch = KEYS[1]
  local n = tonumber(ARGV[2])
  local now = now_ms(ARGV[10])
  local ctx = gossip_context(ARGV, 5)
  local pending = {}
  for i = 4, n + 2 do pending[#pending + 1] = KEYS[i] end
  local fence = shard_fence(KEYS[2], now)

  local horizon = tonumber(ARGV[12])
  local rebalanced, left = 0, 0
  -- How long no sweep of these keys can change anything: the least of the idle holders' spans (bucket_sweep_idle's
  -- until), 0 once a key needs the next round's sweep (it went the whole way and stays watched).
  local quiet_for = nil
  local stranded = {}
  for i = 1, tonumber(ARGV[11]) do
    local key = KEYS[n + 2 + i]
    local base = 12 + (i - 1) * 5
    stranded[i] = 0
    local p = gossip_params(ctx, ARGV, base + 2)
    local changed = false
    local watched = false
    local idle_until = false
    if ARGV[base + 1] == 'tb' then
      idle_until = bucket_sweep_idle(p, key, now)
      if idle_until then
        -- An active holder of its idle peers' share (protocol.ts bucketSweepIdle): nothing to do until it falls
        -- quiet, a peer admits or the epoch's end nears, and it stays watched; a few fields read, not the key.
        watched = true
        local span = math.max(0, math.floor(idle_until - now))
        if quiet_for == nil or span < quiet_for then quiet_for = span end
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
    if watched and not idle_until then quiet_for = 0 end
    if not watched then
      left = left + redis.call('SREM', watch, key)
    elseif changed then
      rebalanced = rebalanced + 1
      -- A transfer is in the hash now: never silent again (federation.lua load_silent).
      redis.call('HDEL', key, 'z')
      mark_changed(key, pending, now)
    end
  end
  if rebalanced > 0 then ring_bell(KEYS[3], bell_lanes_of(pending)) end
  return { rebalanced, left, stranded, quiet_for or 0 }
end
