--[[
  The token bucket's share and refill: protocol.ts shareAt, refill, newBucket, bucketQuotaRemaining and
  decideBucket, line for line,
  in the same order of float operations. A bucket is { tokens, last, sig, slots } (epoch slots without `a`);
  nil means "no state".
]]
--- @include "includes/gcra"

local MAX_REFILL_SEGMENTS = 32
-- A bucket's fields beside its slots.
local BUCKET_FIELDS = { 'tokens', 'last_refill', 'sig' }
-- A bucket's read plans (federation.lua decision_shape, load_state) name its kind and extra fields: built at the
-- first call (a Functions library's load runs without the table library).
local bucket_shape = nil
local function bucket_shape_of()
  if bucket_shape == nil then bucket_shape = 'tb|' .. table.concat(BUCKET_FIELDS, ',') end
  return bucket_shape
end

-- Share moves need the sender to regain a share `skew` after the epoch, within the kept epochs.
local function transfers_allowed(p)
  return not p.unbounded and p.n > 1 and p.period > p.skew
end

-- End of the span in which a wiped region holds no share.
local function bucket_fence_end(p, fence)
  if fence <= 0 then return 0 end
  return (math.floor(fence / p.period) + 1) * p.period + p.skew
end

local function epoch_cells(p, slots, id)
  return cells_of(slots, id, p.n, false)
end

-- What r still pays in the skew span for an epoch: Σ_d max(0, x[r][d] − x[d][r]) (protocol.ts nettedGiven).
local function netted_given(slot, n, r)
  local total = 0
  for d = 0, n - 1 do
    if d ~= r then total = total + math.max(0, slot.x[r][d] - slot.x[d][r]) end
  end
  return total
end

-- σ_r(t) for the view `slots`.
local function share_at(p, slots, fence, t)
  if p.unbounded then return SHARE_UNITS end
  if t < bucket_fence_end(p, fence) then return 0 end
  local r = p.self
  local epoch = math.floor(t / p.period)
  local share = p.units[r] + net_transfer(epoch_cells(p, slots, epoch), p.n, r)
  if t - epoch * p.period < p.skew then share = share - netted_given(epoch_cells(p, slots, epoch - 1), p.n, r) end
  -- Clamped: a region that passed received share on may pay more than it holds in the skew span.
  return math.max(0, share)
end

-- b_r, this region's part of the budget: kept on the params (its budget, units and index never change).
local function bucket_budget(p)
  if p.unbounded then return 0 end
  local part = p.budget_part
  if part == nil then
    part = portion(p.budget, p.units[p.self])
    p.budget_part = part
  end
  return part
end

-- cap_r(σ) = C·σ/S + b_r
local function bucket_capacity(p, share)
  return (p.capacity * share) / SHARE_UNITS + bucket_budget(p)
end

-- rate_r(σ) = (L·σ)/(P·S) tokens per ms
local function bucket_rate(p, share)
  return (p.limit * share) / (p.period * SHARE_UNITS)
end

local function next_share_change(p, fence, t)
  local epoch_start = math.floor(t / p.period) * p.period
  local next = epoch_start + p.period
  local skew_edge = epoch_start + p.skew
  if skew_edge > t and skew_edge < next then next = skew_edge end
  local fence_end = bucket_fence_end(p, fence)
  if fence_end > t and fence_end < next then next = fence_end end
  return next
end

--[[
  Tokens at `now` from `tokens` at `t`: the refill integrated over the exact piecewise-constant σ path, σ at a time
  being share_of(p, view, fence, time) (share_at over a view's slots; the silent and loud views' own, silent_bucket.lua
  and loud_bucket.lua), `latest` the latest epoch the view keeps (-1: none). The share settles two periods and the
  skew after it: one last segment from there.
]]
-- (math.min and math.max written out as comparisons: the same doubles, bucket_room below says why; the loud view's
-- every admission runs this.)
local function refill_over(p, share_of, view, fence, tokens, t, latest, now)
  if now <= t then
    local cap = bucket_capacity(p, share_of(p, view, fence, now))
    if cap < tokens then return cap end
    return tokens
  end
  local settles = bucket_fence_end(p, fence)
  local settled = (latest + 2) * p.period + p.skew
  if settled > settles then settles = settled end
  local segment = 0
  while segment < MAX_REFILL_SEGMENTS and t < now and t < settles do
    local stop = now
    local change = next_share_change(p, fence, t)
    if change < stop then stop = change end
    local share = share_of(p, view, fence, t)
    local cap, refilled = bucket_capacity(p, share), tokens + (stop - t) * bucket_rate(p, share)
    tokens = cap
    if refilled < tokens then tokens = refilled end
    t = stop
    segment = segment + 1
  end
  local share = share_of(p, view, fence, now)
  local cap = bucket_capacity(p, share)
  if t < now and t >= settles then
    local refilled = tokens + (now - t) * bucket_rate(p, share)
    tokens = cap
    if refilled < tokens then tokens = refilled end
  end
  if cap < tokens then return cap end
  return tokens
end

-- Tokens of `bucket` at `now` (refill_over its slots).
local function refill(p, bucket, fence, now)
  local latest = -1
  for k = 0, KEPT_WINDOWS - 1 do latest = math.max(latest, bucket.slots[k].id) end
  return refill_over(p, share_at, bucket.slots, fence, bucket.tokens, bucket.last, latest, now)
end

-- A bucket with no state: full, or after a data loss empty at the fence and refilled since.
local function new_bucket(p, fence, now)
  local slots = empty_slots(p.n, false)
  if fence > 0 and fence <= now then
    local empty = { tokens = 0, last = fence, sig = 0, slots = slots }
    return { tokens = refill(p, empty, fence, now), last = now, sig = share_at(p, slots, fence, now), slots = slots }
  end
  local share = share_at(p, slots, fence, now)
  return { tokens = bucket_capacity(p, share), last = now, sig = share, slots = slots }
end

-- protocol.ts viewShare: σ_d from a view without the skew term.
local function view_share(p, slot, d)
  return p.units[d] + net_transfer(slot, p.n, d)
end

-- protocol.ts peersHoldShare: a peer holds share in the epoch's slot.
local function peers_hold_share(p, slot)
  for d = 0, p.n - 1 do
    if d ~= p.self and view_share(p, slot, d) > 0 then return true end
  end
  return false
end

-- What one global bucket surely held by `now` in its epoch, before protocol.ts globalBucketHeld clamps it to C:
-- min(C, L) less the previous epoch's use `before` (carried into the epoch), plus L·elapsed/P.
-- (On every decision's path: math.min and math.max written out as comparisons, which give the same doubles, the first
-- argument unless a later one is strictly beyond it, at a quarter of a C call's instructions.)
local function bucket_room(p, now, before)
  local epoch = math.floor(now / p.period)
  local smaller = p.capacity
  if p.limit < smaller then smaller = p.limit end
  local carried = 0
  if smaller - before > carried then carried = smaller - before end
  return carried + (p.limit * (now - epoch * p.period)) / p.period
end

--[[
  protocol.ts bucketQuotaRemaining over a view's counts (the general, silent and loud views each sum their own):
  the federation's remaining quota after a decision, in whole tokens, never below this region's own `remaining`;
  `used` and `before` are the epoch's and the previous epoch's use before the decision, `admitted` what it took.
  (Only the federated paths ask: a single region's quota is its remaining.)
]]
-- bucket_quota_of outside the fence's zero-share span, on the epoch's bucket_room `room` (a caller that needs the room
-- for its false-denial test too computes it once).
local function bucket_quota_at_room(p, remaining, admitted, used, room)
  -- max(0, floor(remaining)), then max(own, min(C, max(0, floor(min(C, room) - (used + admitted))))), written out
  -- (bucket_room says why).
  local own, floored = 0, math.floor(remaining)
  if floored > own then own = floored end
  local capacity = p.capacity
  local held = capacity
  if room < held then held = room end
  local left, over = 0, math.floor(held - (used + admitted))
  if over > left then left = over end
  local quota = capacity
  if left < quota then quota = left end
  if quota > own then own = quota end
  return own
end

local function bucket_quota_of(p, fence, now, remaining, admitted, used, before)
  if now < bucket_fence_end(p, fence) then return math.max(0, math.floor(remaining)) end
  return bucket_quota_at_room(p, remaining, admitted, used, bucket_room(p, now, before))
end

-- protocol.ts bucketFalseDenial: outside the fence's zero-share span, while a peer holds share in the epoch (a
-- region holding every share unit has nothing to ask for), the view's epoch use plus the cost fits in bucket_room.
local function bucket_false_denial(p, bucket, fence, now, cost)
  if now < bucket_fence_end(p, fence) then return false end
  local epoch = math.floor(now / p.period)
  local current = epoch_cells(p, bucket.slots, epoch)
  if not peers_hold_share(p, current) then return false end
  return sum_cells(current.c, p.n) + cost <= bucket_room(p, now, sum_cells(epoch_cells(p, bucket.slots, epoch - 1).c, p.n))
end

-- bucket_quota_of for `bucket`, the state the decision started from.
local function bucket_quota_remaining(p, bucket, fence, now, remaining, admitted)
  local epoch = math.floor(now / p.period)
  return bucket_quota_of(p, fence, now, remaining, admitted, sum_cells(epoch_cells(p, bucket.slots, epoch).c, p.n),
    sum_cells(epoch_cells(p, bucket.slots, epoch - 1).c, p.n))
end

-- The decision without its effect: { allowed, remaining, quota, tokens (after refill), bucket (the current
-- state), false_denial }.
local function decide_bucket(p, bucket, fence, now, cost)
  local current = bucket or new_bucket(p, fence, now)
  local tokens = refill(p, current, fence, now)
  if tokens < cost then
    return { allowed = false, remaining = tokens, quota = bucket_quota_remaining(p, current, fence, now, tokens, 0),
      tokens = tokens, bucket = current, false_denial = bucket_false_denial(p, current, fence, now, cost) }
  end
  return { allowed = true, remaining = tokens - cost,
    quota = bucket_quota_remaining(p, current, fence, now, tokens - cost, cost), tokens = tokens, bucket = current }
end

-- The admission's effect: the new bucket state.
local function commit_bucket(p, decision, fence, now, cost)
  local slots = decision.bucket.slots
  local epoch = math.floor(now / p.period)
  local k = slot_index(epoch)
  if slots[k].id ~= epoch then slots[k] = empty_slot(p.n, epoch, false) end
  local slot = slots[k]
  slot.c[p.self] = slot.c[p.self] + cost
  slot.t[p.self] = math.max(slot.t[p.self], now)
  return { tokens = decision.tokens - cost, last = now, sig = share_at(p, slots, fence, now), slots = slots }
end

--[[
  Loads a token bucket: nil bucket when the key holds no `tokens`. `for_decision` reads only what a decision
  and its write touch: every slot id, the transfers to and from this region, every region's cost and its own
  admission time in the epoch of `now`. A single region reads no slots at all. Merges and sweeps read every cell, with the
  token transfers y[o][d] in the slots' `a` cells (fields a<k>.<o>.<d>; token buckets have no acknowledgements).
  `flat`: the key's HGETALL reply, read already by a decision's silent test (silent_bucket.lua); nil reads the key.
]]
local function load_bucket(p, key, for_decision, now, flat)
  local ids, cells, shape = nil, nil, nil
  if p.n == 1 then ids = {} end
  if for_decision then
    local current = slot_index(math.floor(now / p.period))
    local previous = slot_index(math.floor(now / p.period) - 1)
    -- Every region's count of the current and the previous epoch too: the false-denial test
    -- (bucket_false_denial) sums them.
    cells = function(plan, k) plan_row_cells(plan, p.n, k, p.self, false, k == current, k == current or k == previous) end
    shape = decision_shape(bucket_shape_of(), p.n, p.self, current, previous)
  elseif p.n == 1 then
    shape = decision_shape(bucket_shape_of(), 1, 0, -1, -1)
  end
  local read, state = pcall(load_state, key, p.n, not for_decision, BUCKET_FIELDS, ids, cells, shape, flat)
  if not read then
    -- A single region's bucket (gcra.lua: this region decided the rule alone before): its hash from now on.
    if not gcra_to_hash(key, p.capacity, p.limit, p.period, now) then error(state) end
    state = load_state(key, p.n, not for_decision, BUCKET_FIELDS, ids, cells, shape)
  end
  local tokens = tonumber(state.extra.tokens)
  local bucket = nil
  if tokens ~= nil then
    bucket = {
      tokens = tokens,
      last = tonumber(state.extra.last_refill) or 0,
      sig = tonumber(state.extra.sig) or 0,
      slots = state.slots,
    }
  end
  return state, bucket
end

-- How long a federated bucket key lives after a write (store_bucket says why).
local function federated_bucket_ttl(period, skew, capacity, budget, limit)
  return 3 * period + skew + math.ceil((capacity + budget) * period / limit) + 1000
end

--[[
  Writes a bucket. A single region keeps only tokens and last_refill. A federated key outlives the span in
  which its view can still change σ (the latest kept epoch + 2 periods + skew) plus a refill to full from
  empty at its base share (C + B)·P/L: once it expires, a new (full) bucket is what it would hold anyway.
]]
local function store_bucket(p, state, bucket)
  local sets = { 'tokens', fmt(bucket.tokens), 'last_refill', fmt(bucket.last) }
  local ttl
  if p.n > 1 then
    sets[5], sets[6] = 'sig', fmt(bucket.sig)
    store_slots(state, bucket.slots, sets)
    ttl = federated_bucket_ttl(p.period, p.skew, p.capacity, p.budget, p.limit)
  else
    local share = share_at(p, bucket.slots, 0, bucket.last)
    local rate = bucket_rate(p, share)
    local full_in = 0
    if rate > 0 then full_in = math.ceil((bucket_capacity(p, share) - bucket.tokens) / rate) end
    ttl = full_in + 1000
    redis.call('HSET', state.key, unpack(sets))
  end
  redis.call('PEXPIRE', state.key, ttl)
end

--[[
  An admission's write (commit_bucket's bucket, epoch slot k): what store_bucket would write when slot k still
  holds the epoch it was loaded with, without comparing every cell read: tokens, last_refill and sig, and this
  region's c and t of slot k (an admission changes no other cell; the same values store_slots would set). A slot
  the admission started anew (another epoch, or none), or a zero cell (not stored), goes through store_bucket.
]]
local function store_admission(p, state, bucket, k)
  local slot = bucket.slots[k]
  local r = p.self
  if p.n == 1 or state.silent or slot.id ~= state.held[k] or slot.c[r] == 0 or slot.t[r] == 0 then
    return store_bucket(p, state, bucket)
  end
  local names = own_slot_names(r, k)
  redis.call('HSET', state.key, 'tokens', fmt(bucket.tokens), 'last_refill', fmt(bucket.last), 'sig', fmt(bucket.sig),
    names[1], fmt(slot.c[r]), names[2], fmt(slot.t[r]))
  redis.call('PEXPIRE', state.key, federated_bucket_ttl(p.period, p.skew, p.capacity, p.budget, p.limit))
end
