--[[
  The token bucket's gossip side: protocol.ts ownShareAt, rebalanceBucket, bucketHasHungryPeer, mergeBucket
  and sweepBucket, line for line, in the same order of float operations.
]]
-- σ_r without what r received: a giver only gives from this.
local function own_share_at(p, slots, fence, t)
  if t < bucket_fence_end(p, fence) then return 0 end
  local r = p.self
  local epoch = math.floor(t / p.period)
  local share = p.units[r] - given(epoch_cells(p, slots, epoch), p.n, r)
  if t - epoch * p.period < p.skew then share = share - given(epoch_cells(p, slots, epoch - 1), p.n, r) end
  return share
end

-- σ_d from a view without the skew term.
local function view_share(p, slot, d)
  return p.units[d] + net_transfer(slot, p.n, d)
end

local function paced(p, slot, d, elapsed)
  return (p.limit * view_share(p, slot, d) * elapsed) / (p.period * SHARE_UNITS)
end

-- Demand-following share transfer in the current epoch. Mutates `slots`; true when it gave.
local function rebalance_bucket(p, slots, fence, now)
  if not transfers_allowed(p) then return false end
  local n, r, policy = p.n, p.self, p.policy
  local epoch = math.floor(now / p.period)
  local elapsed = math.max(1, now - epoch * p.period)
  local slot = epoch_cells(p, slots, epoch)
  if hungry(slot, r, paced(p, slot, r, elapsed), now, policy) then return false end
  local peers = {}
  for d = 0, n - 1 do
    if d ~= r and hungry(slot, d, paced(p, slot, d, elapsed), now, policy) then peers[#peers + 1] = d end
  end
  if #peers == 0 then return false end
  local previous_slot = epoch_cells(p, slots, epoch - 1)
  local is_active = active(slot, r, now, policy) or active(previous_slot, r, now, policy)
  local pace, previous = 0, 0
  if is_active then
    pace = (SHARE_UNITS * slot.c[r] * p.period) / (policy.hunger * p.limit * elapsed)
    previous = (SHARE_UNITS * previous_slot.c[r]) / p.limit
  end
  local reserve = math.max(policy.reserve * p.units[r], pace, previous)
  local surplus = own_share_at(p, slots, fence, now) - reserve
  if surplus < policy.min_surplus then return false end
  local give = math.floor((surplus * policy.give) / #peers)
  if give < 1 then return false end
  local k = slot_index(epoch)
  if slots[k].id ~= epoch then slots[k] = empty_slot(n, epoch, false) end
  for _, d in ipairs(peers) do slots[k].x[r][d] = slots[k].x[r][d] + give end
  return true
end

local function bucket_has_hungry_peer(p, slots, now)
  if not transfers_allowed(p) then return false end
  local epoch = math.floor(now / p.period)
  local elapsed = math.max(1, now - epoch * p.period)
  local slot = epoch_cells(p, slots, epoch)
  for d = 0, p.n - 1 do
    if d ~= p.self and hungry(slot, d, paced(p, slot, d, elapsed), now, p.policy) then return true end
  end
  return false
end

local function copy_slots(p, slots)
  local copy = {}
  for k = 0, KEPT_WINDOWS - 1 do copy[k] = join_slots(slots[k], slots[k], p.n) end
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
        if held.id ~= slot.id then base = empty_slot(n, slot.id, false) end
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
    rebalance_bucket(p, slots, fence, now)
  end
  local share = share_at(p, slots, fence, now)
  tokens = math.min(tokens, bucket_capacity(p, share))
  return true, { tokens = tokens, last = now, sig = share, slots = slots }
end

-- The token-bucket sweep: refill, rebalance the current epoch, clamp. Returns changed, new bucket.
local function sweep_bucket(p, bucket, fence, now)
  if not transfers_allowed(p) or now < bucket_fence_end(p, fence) then return false, bucket end
  local tokens = refill(p, bucket, fence, now)
  local slots = copy_slots(p, bucket.slots)
  if not rebalance_bucket(p, slots, fence, now) then return false, bucket end
  local share = share_at(p, slots, fence, now)
  return true, { tokens = math.min(tokens, bucket_capacity(p, share)), last = now, sig = share, slots = slots }
end

