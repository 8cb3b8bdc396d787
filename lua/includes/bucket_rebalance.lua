--[[
  The token bucket's gossip side: protocol.ts rebalanceBucket, bucketHasHungryPeer, mergeBucket and sweepBucket,
  line for line, in the same order of float operations. Token transfers y[o][d] live in the slots' `a` cells.
]]
-- Hungry (protocol.ts bucketHungry): paced use above the hunger fraction, or admitting (active, not stopped)
-- while holding less than the hunger fraction of its base share.
local function bucket_hungry(p, slot, previous, d, elapsed, now)
  local share = view_share(p, slot, d)
  local paced = (p.limit * share * elapsed) / (p.period * SHARE_UNITS)
  if hungry(p, slot, previous, d, paced, now) then return true end
  return share < p.policy.hunger * p.units[d] and slot.c[d] > 0 and active(slot, d, now, p.policy)
    and not stopped(p, slot, previous, d, now)
end

-- Where the end-of-epoch span of now's epoch begins: its last min(P/10, idle/5) ms (protocol.ts returningFrom).
local function returning_from(p, now)
  local stop = (math.floor(now / p.period) + 1) * p.period
  return stop - math.min(p.period / 10, p.policy.idle / 5)
end

-- Whether now is in the end-of-epoch span (received share goes back home; protocol.ts returning).
local function returning(p, now)
  return now >= returning_from(p, now)
end

-- Does r hold share of any peer's (held_from > 0)?
local function held_any(slot, n, r)
  for d = 0, n - 1 do
    if d ~= r and held_from(slot, r, d) > 0 then return true end
  end
  return false
end

-- End of the epoch: received share (with its tokens) goes back to the peers it came from (protocol.ts
-- returnBucketShare). Mutates `slots`; returns true when it gave, and the tokens left.
local function return_bucket_share(p, slots, fence, now, tokens)
  local n, r = p.n, p.self
  local epoch = math.floor(now / p.period)
  local slot = epoch_cells(p, slots, epoch)
  local share = share_at(p, slots, fence, now)
  local amounts = return_amounts(slot, n, r, share, p.policy.min_surplus)
  if amounts == nil then return false, tokens end
  local keep = math.min(tokens, 1)
  local k = slot_index(epoch)
  if slots[k].id ~= epoch then slots[k] = empty_slot(n, epoch, true) end
  local remaining = tokens
  for d = 0, n - 1 do
    local amount = amounts[d]
    if amount > 0 then
      local moved = math.min(((tokens - keep) * amount) / share, (p.capacity * amount) / SHARE_UNITS)
      slots[k].x[r][d] = slots[k].x[r][d] + amount
      slots[k].a[r][d] = slots[k].a[r][d] + moved
      remaining = remaining - moved
    end
  end
  return true, remaining
end

-- Demand-following share transfer in the current epoch, tokens moving with the share (protocol.ts
-- rebalanceBucket). Mutates `slots` (y in the `a` cells); returns true when it gave, and the tokens left.
local function rebalance_bucket(p, slots, fence, now, tokens)
  if not transfers_allowed(p) then return false, tokens end
  local n, r, policy = p.n, p.self, p.policy
  local epoch = math.floor(now / p.period)
  local elapsed = math.max(1, now - epoch * p.period)
  local slot = epoch_cells(p, slots, epoch)
  if returning(p, now) then return return_bucket_share(p, slots, fence, now, tokens) end
  local previous_slot = epoch_cells(p, slots, epoch - 1)
  local free = free_donor(p, slot, previous_slot, r, now)
  -- Fair shares under overload (protocol.ts): toward a hungry peer below its base share, a giver above its own
  -- base yields down to that base, hungry or not.
  local self_hungry = (not free) and bucket_hungry(p, slot, previous_slot, r, elapsed, now)
  local peers = {}
  local under_base = false
  for d = 0, n - 1 do
    if d ~= r and wanting(p, slot, previous_slot, d, now, free, bucket_hungry(p, slot, previous_slot, d, elapsed, now)) then
      local below = view_share(p, slot, d) < p.units[d]
      if (not self_hungry) or below then
        peers[#peers + 1] = d
        if below then under_base = true end
      end
    end
  end
  if #peers == 0 then
    -- A free donor with nobody to give to sends back what it holds of its peers' share (protocol.ts
    -- rebalanceBucket): the burst that drew it has stopped, and its peers read the same stopped() of it.
    if free and held_any(slot, n, r) then return return_bucket_share(p, slots, fence, now, tokens) end
    return false, tokens
  end
  local reserve = 0
  if not free then
    local pace = (SHARE_UNITS * slot.c[r] * p.period) / (policy.hunger * p.limit * elapsed)
    local previous = (SHARE_UNITS * previous_slot.c[r]) / p.limit
    reserve = math.max(policy.reserve * p.units[r], pace, previous)
    if under_base then reserve = math.min(reserve, p.units[r]) end
  end
  local share = share_at(p, slots, fence, now)
  local surplus = share - reserve
  if surplus < policy.min_surplus then return false, tokens end
  local fraction = policy.give
  if free then fraction = 1 end
  local give = math.floor((surplus * fraction) / #peers)
  if give < 1 then return false, tokens end
  -- The giver keeps one token (or what it has), to admit with and so show demand later.
  local spare = (tokens - math.min(tokens, 1)) / #peers
  local moved = math.min((tokens * give) / share, (p.capacity * give) / SHARE_UNITS, spare)
  local k = slot_index(epoch)
  if slots[k].id ~= epoch then slots[k] = empty_slot(n, epoch, true) end
  local left = tokens
  for _, d in ipairs(peers) do
    slots[k].x[r][d] = slots[k].x[r][d] + give
    slots[k].a[r][d] = slots[k].a[r][d] + moved
    left = left - moved
  end
  return true, left
end

-- Σ_{o≠r} y[o][r] in one slot (y travels in the `a` cells).
local function tokens_received(slot, n, r)
  local total = 0
  for o = 0, n - 1 do
    if o ~= r then total = total + slot.a[o][r] end
  end
  return total
end

--[[
  protocol.ts bucketSweepIdle, read from the few fields of the current epoch it needs (the sweep loads the key whole
  otherwise): r holds a peer's share, admitted within the quiet span, no peer admitted within idle, and the epoch's
  returning span has not begun. Then a sweep changes nothing and the key stays watched. False for a key that is
  not a bucket's hash (a silent string: the sweep's own read handles it). Where it holds, returns until when
  (protocol.ts bucketSweepIdleUntil): r's last admission a quiet span old, or the returning span's start.
]]
local function bucket_sweep_idle(p, key, now)
  if not transfers_allowed(p) or returning(p, now) then return false end
  local n, r = p.n, p.self
  local epoch = math.floor(now / p.period)
  local k = label(slot_index(epoch))
  local names = { 'tokens', 'w' .. k }
  for o = 0, n - 1 do names[#names + 1] = 't' .. k .. '.' .. label(o) end
  for d = 0, n - 1 do
    if d ~= r then
      names[#names + 1] = 'x' .. k .. '.' .. label(d) .. '.' .. label(r)
      names[#names + 1] = 'x' .. k .. '.' .. label(r) .. '.' .. label(d)
    end
  end
  local read, values = pcall(redis.call, 'HMGET', key, unpack(names))
  if not read or values[1] == false or tonumber(values[2]) ~= epoch then return false end
  local own = tonumber(values[3 + r]) or 0
  if not (own > 0 and now - own <= quiet_span(p)) then return false end
  for o = 0, n - 1 do
    local t = tonumber(values[3 + o]) or 0
    if o ~= r and t > 0 and now - t <= p.policy.idle then return false end
  end
  local at = 3 + n
  for d = 0, n - 1 do
    if d ~= r then
      if (tonumber(values[at]) or 0) - (tonumber(values[at + 1]) or 0) > 0 then
        return math.min(own + quiet_span(p), returning_from(p, now))
      end
      at = at + 2
    end
  end
  return false
end

-- Held share of a peer's, or a hungry peer this region could still give to: its share in view at least
-- max(min_surplus, the hungry peers' count) (protocol.ts bucketHasHungryPeer).
local function bucket_has_hungry_peer(p, slots, now)
  if not transfers_allowed(p) then return false end
  local epoch = math.floor(now / p.period)
  local elapsed = math.max(1, now - epoch * p.period)
  local slot = epoch_cells(p, slots, epoch)
  local previous = epoch_cells(p, slots, epoch - 1)
  local hungry_peers = 0
  for d = 0, p.n - 1 do
    if d ~= p.self then
      if held_from(slot, p.self, d) > 0 then return true end
      if bucket_hungry(p, slot, previous, d, elapsed, now) then hungry_peers = hungry_peers + 1 end
    end
  end
  return hungry_peers > 0 and view_share(p, slot, p.self) >= math.max(p.policy.min_surplus, hungry_peers)
end

-- A fresh copy of the kept slots (the shared zero slot too: the copy is written to). Each row of cells is copied by
-- one constructor ({ [0] = row[0], unpack(row, 1, n - 1) }: sized once, the same values), not joined with itself.
local function copy_slots(p, slots)
  local n = p.n
  local last = n - 1
  local copy = {}
  for k = 0, KEPT_WINDOWS - 1 do
    local s = slots[k]
    local c, t, x, a = s.c, s.t, s.x, s.a
    local cx = { [0] = x[0], unpack(x, 1, last) }
    for o = 0, last do
      local row = x[o]
      cx[o] = { [0] = row[0], unpack(row, 1, last) }
    end
    local slot = { id = s.id, c = { [0] = c[0], unpack(c, 1, last) }, x = cx, t = { [0] = t[0], unpack(t, 1, last) } }
    if a ~= nil then
      local ca = { [0] = a[0], unpack(a, 1, last) }
      for o = 0, last do
        local row = a[o]
        ca[o] = { [0] = row[0], unpack(row, 1, last) }
      end
      slot.a = ca
    end
    copy[k] = slot
  end
  return copy
end

--[[
  Applies a peer's epoch slots: refill first (old view), join, rebalance the current epoch, clamp to the new cap.
  Unbounded: charge the bucket for the peers' newly seen consumption. Returns changed, new bucket.
]]
local function merge_bucket(p, bucket, fence, now, incoming)
  local n = p.n
  local current = bucket or new_bucket(p, fence, now)
  local epoch = math.floor(now / p.period)
  local slots = copy_slots(p, current.slots)
  local changed_ids, charged = {}, 0
  for _, slot in ipairs(incoming) do
    if slot.id >= 0 and slot.id >= epoch - 1 and slot.id <= epoch + 1 then
      local k = slot_index(slot.id)
      local held = slots[k]
      if held.id <= slot.id then
        local base = held
        if held.id ~= slot.id then base = empty_slot(n, slot.id, true) end
        local joined = join_slots(base, slot, n)
        if not same_slot(joined, held, n) then
          for o = 0, n - 1 do
            if o ~= p.self then charged = charged + (joined.c[o] - base.c[o]) end
          end
          slots[k] = joined
          changed_ids[#changed_ids + 1] = slot.id
        end
      end
    end
  end
  if #changed_ids == 0 then return false, bucket end
  local tokens = refill(p, current, fence, now)
  if p.unbounded then tokens = math.max(0, tokens - charged) end
  local current_changed = false
  for _, id in ipairs(changed_ids) do
    if id == epoch then current_changed = true end
  end
  if current_changed and transfers_allowed(p) and now >= bucket_fence_end(p, fence) then
    -- Credit the tokens newly moved here in the current epoch (never in another epoch, never before the fence end).
    tokens = tokens + (tokens_received(cells_of(slots, epoch, n, true), n, p.self)
      - tokens_received(cells_of(current.slots, epoch, n, true), n, p.self))
    local _
    _, tokens = rebalance_bucket(p, slots, fence, now, tokens)
  end
  local share = share_at(p, slots, fence, now)
  tokens = math.min(tokens, bucket_capacity(p, share))
  return true, { tokens = tokens, last = now, sig = share, slots = slots }
end

-- The token-bucket sweep: refill, rebalance the current epoch, clamp. Returns changed, new bucket.
local function sweep_bucket(p, bucket, fence, now)
  if not transfers_allowed(p) or now < bucket_fence_end(p, fence) then return false, bucket end
  local slots = copy_slots(p, bucket.slots)
  local gave, tokens = rebalance_bucket(p, slots, fence, now, refill(p, bucket, fence, now))
  if not gave then return false, bucket end
  local share = share_at(p, slots, fence, now)
  return true, { tokens = math.min(tokens, bucket_capacity(p, share)), last = now, sig = share, slots = slots }
end

