--[[
  apply_gossip.lua's body as a function of its KEYS and ARGV (the script and the gossip Functions library,
  lua/functions/gossip.lua, both call it). KEYS, ARGV and the reply: lua/apply_gossip.lua.
]]
--- @include "includes/clock"
--- @include "includes/federation"
--- @include "includes/rebalance"
--- @include "includes/window_decide"
--- @include "includes/window_rebalance"
--- @include "includes/bucket_share"
--- @include "includes/bucket_rebalance"
--- @include "includes/bell"

-- protocol.ts ownRowAhead: this region's own row (c, t, x[r][.]) in `merged` (slots by index) is ahead of the sender's
-- view of it in `incoming` (the entry's slots), in a window or epoch the sender sent.
local function own_row_ahead(incoming, merged, r, n)
  for _, sent in ipairs(incoming) do
    local own = merged[slot_index(sent.id)]
    if own ~= nil and own.id == sent.id then
      if own.c[r] > sent.c[r] or own.t[r] > sent.t[r] then return true end
      for d = 0, n - 1 do
        if own.x[r][d] > sent.x[r][d] then return true end
      end
    end
  end
  return false
end

-- protocol.ts relayWorthy: `incoming` (the entry's slots) holds a cell above `held` (this region's slots before the
-- merge, by position; nil for a key it did not hold) other than the sender's own count and time (`bucket`: none of
-- the sender's own row, its transfers and the tokens moved with them) and the `target` peer's own row (nil: none left
-- out), in a window or epoch the merge takes (a held slot of an older window reads as zeros).
local function relay_worthy(held, incoming, sender, n, bucket, target)
  for _, sent in ipairs(incoming) do
    local at = held and held[slot_index(sent.id)]
    if sent.id >= 0 and not (at ~= nil and at.id > sent.id) then
      local mine = nil
      if at ~= nil and at.id == sent.id then mine = at end
      for o = 0, n - 1 do
        -- A bucket's sender sends its whole row to every peer itself; the target wrote its own.
        if not (bucket and o == sender) and o ~= target then
          if o ~= sender and (sent.c[o] > (mine and mine.c[o] or 0) or sent.t[o] > (mine and mine.t[o] or 0)) then return true end
          for d = 0, n - 1 do
            if sent.x[o][d] > (mine and mine.x[o][d] or 0) then return true end
            if sent.a[o][d] > (mine and mine.a and mine.a[o][d] or 0) then return true end
          end
        end
      end
    end
  end
  return false
end

-- protocol.ts relayTargets, computed on the slots before the merge for both cases of `idle` (known after it): strict[d]
-- for each peer d but the sender and this region, leaving d's own row out (an idle region), and `loose`, the same for
-- every such peer when no row is left out (a region that admits; strict[d] implies it).
local function relay_targets(held, incoming, sender, self, n, bucket)
  local strict = {}
  for d = 0, n - 1 do
    if d ~= sender and d ~= self then strict[d] = relay_worthy(held, incoming, sender, n, bucket, d) end
  end
  return strict, relay_worthy(held, incoming, sender, n, bucket, nil)
end

--[[
  `quiet` (apply_job.lua's quiet call only): the merge leaves the shard's bell as it is, since the region's
  publisher runs in the caller's process and is told the lanes from the reply instead (src/federation/gossip/apply.ts).
]]
local function apply_gossip(KEYS, ARGV, quiet)
  local key, watch, fast, bell = KEYS[1], KEYS[3], KEYS[4], KEYS[5]
  local n = tonumber(ARGV[2])
  local now = now_ms(ARGV[16])
  local ctx = gossip_context(ARGV, 10)
  local p = gossip_params(ctx, ARGV, 6)
  local is_bucket = ARGV[5] == 'tb'
  local sender_time = tonumber(ARGV[17]) or now
  local pending = {}
  for i = 6, #KEYS do pending[#pending + 1] = KEYS[i] end
  local fence = shard_fence(KEYS[2], now)

  local incoming = {}
  local at = 19
  -- The cells' texts through number_of (fmt.lua: tonumber's very number, kept): most are 0 or repeat across entries.
  for i = 1, tonumber(ARGV[18]) do
    local slot = empty_slot(n, number_of(ARGV[at]), true)
    at = at + 1
    local c, x, a, t = slot.c, slot.x, slot.a, slot.t
    for o = 0, n - 1 do c[o] = number_of(ARGV[at]); at = at + 1 end
    for o = 0, n - 1 do
      local row = x[o]
      for d = 0, n - 1 do row[d] = number_of(ARGV[at]); at = at + 1 end
    end
    -- Windows: acknowledgements a[o][d]; token buckets: the tokens y[o][d] moved with the share (same place).
    for o = 0, n - 1 do
      local row = a[o]
      for d = 0, n - 1 do row[d] = number_of(ARGV[at]); at = at + 1 end
    end
    for o = 0, n - 1 do t[o] = number_of(ARGV[at]); at = at + 1 end
    incoming[i] = slot
  end

  -- What this region has given to each peer (its own x row summed over the kept slots), and its total: a grant is a
  -- merge after which the total grew; its grantees the peers whose part grew (protocol.ts granteesOf).
  local function own_given(slots)
    local row, total = {}, 0
    for d = 0, n - 1 do row[d] = 0 end
    for k = 0, KEPT_WINDOWS - 1 do
      if slots[k].id >= 0 then
        for d = 0, n - 1 do
          row[d] = row[d] + slots[k].x[ctx.self][d]
          total = total + slots[k].x[ctx.self][d]
        end
      end
    end
    return total, row
  end
  -- protocol.ts admitsIn: this region admitted in a kept slot (it is not idle in the key).
  local function admits_in(slots)
    for k = 0, KEPT_WINDOWS - 1 do
      if slots[k].id >= 0 and slots[k].c[ctx.self] > 0 then return true end
    end
    return false
  end

  local changed, hungry_peer, granted, ahead, admits = false, false, false, false, false
  -- The lanes this merge gave the publisher work in (bell.lua's mask; -1 every lane), 0 for none.
  local rung = 0
  -- The merge is news to peer d (relay_targets): worthy_strict[d] when this region is idle in the key, else
  -- worthy_loose (the same for every peer).
  local worthy_strict, worthy_loose = {}, false
  -- grew[d]: this region's transfer to peer d grew in the merge (d a grantee).
  local grew = {}
  local sender = tonumber(ARGV[15])
  -- An operator reset the key (reset_key.lua): what the sender changed before it (within the skew) is what the
  -- reset forgot, and stays forgotten.
  local mark = redis.pcall('HGET', key, 'r')
  if type(mark) == 'table' then
    -- A silent bucket's string (silent_string.lua) or a single region's bucket (gcra.lua: this region decided the
    -- rule alone before): its hash from now on.
    if not (silent_string_to_hash(key) or is_bucket and gcra_to_hash(key, p.capacity, p.limit, p.period, now)) then error(mark) end
    mark = false
  end
  local reset_at = tonumber(mark)
  if reset_at ~= nil and sender_time <= reset_at + ctx.skew then
    return { 0, now - sender_time, 0, 0 }
  end
  if is_bucket then
    local state, bucket = load_bucket(p, key, false, now)
    local merged
    local before, before_row = 0, {}
    if bucket ~= nil then before, before_row = own_given(bucket.slots) end
    worthy_strict, worthy_loose = relay_targets(bucket and bucket.slots, incoming, sender, ctx.self, n, true)
    changed, merged = merge_bucket(p, bucket, fence, now, incoming)
    if changed then
      store_bucket(p, state, merged)
      hungry_peer = bucket_has_hungry_peer(p, merged.slots, now)
      local after, after_row = own_given(merged.slots)
      granted = after > before
      for d = 0, n - 1 do grew[d] = after_row[d] > (before_row[d] or 0) end
      admits = admits_in(merged.slots)
      ahead = own_row_ahead(incoming, merged.slots, ctx.self, n)
    end
  else
    local state = load_state(key, n, true, {})
    local before, before_row = own_given(state.slots)
    worthy_strict, worthy_loose = relay_targets(state.slots, incoming, sender, ctx.self, n, false)
    changed = merge_window(p, state.slots, fence, now, incoming)
    if changed then
      store_slots(state, state.slots)
      redis.call('PEXPIRE', key, window_ttl(p))
      hungry_peer = window_has_hungry_peer(p, state.slots, now)
      local after, after_row = own_given(state.slots)
      granted = after > before
      for d = 0, n - 1 do grew[d] = after_row[d] > before_row[d] end
      admits = admits_in(state.slots)
      ahead = own_row_ahead(incoming, state.slots, ctx.self, n)
    end
  end

  if changed then
    -- A peer's cells or a transfer may now be in the hash: the key is no longer silent (federation.lua load_silent).
    redis.call('HDEL', key, 'z')
    -- protocol.ts marksOfMerge and marksPeer: what this region gave goes to its grantees, and to every peer when it
    -- admits in the key itself (an idle donor's grant is not passed on); besides, the merge goes back to the sender
    -- when the sender's view of this region's own row is behind (ownRowAhead), and to each other peer it brought
    -- more than what the sender sends it itself and what it wrote itself (relayTargets).
    local any_grantee = false
    for d = 0, n - 1 do any_grantee = any_grantee or (grew[d] == true) end
    local broadcast = admits and any_grantee
    local marks = {}
    for _, set in ipairs(pending) do
      local d = pending_peer(set)
      local to_it
      if d == sender then
        to_it = broadcast or ahead
      elseif admits then
        to_it = broadcast or worthy_loose
      else
        to_it = broadcast or worthy_strict[d] == true
      end
      if grew[d] or to_it then marks[#marks + 1] = set end
    end
    local marked = granted or hungry_peer or #marks > 0
    if #marks > 0 then mark_changed(key, marks, now) end
    if hungry_peer then redis.call('SADD', watch, key) end
    if granted then redis.call('SADD', fast, key) end
    -- The bell is for the publisher: rung only when this merge gave it something to send or sweep (and answered
    -- either way, for a publisher told in process: quiet).
    if marked then
      rung = bell_lanes_of(marks)
      if hungry_peer then rung = bit.bor(rung, BELL_WATCH) end
      if granted then rung = bit.bor(rung, BELL_FAST) end
      if not quiet then ring_bell(bell, rung) end
    end
  end
  return { changed and 1 or 0, now - sender_time, granted and 1 or 0, rung }
end
