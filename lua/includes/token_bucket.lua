--[[
  Token bucket for decide.lua (protocol.ts decideBucket): a hash with `tokens` and `last_refill` (ms), a cost
  of n tokens, a denial writes nothing (a false one only refreshes t, demand). Federated, the region holds a share σ of capacity and rate that
  follows its epoch slots (bucket_share.lua); a single region holds all of it and stores one number (gcra.lua).
  rule = { key, limit (tokens per period), period, burst (capacity), budget, cost }
]]

-- single_region_bucket (one region: gcra.lua, shared with the single-region library).
--- @include "includes/bucket_single"

-- Allowed or not, tokens after the request, when the bucket is full again and when a retry may succeed.
local function bucket_verdict(tokens, capacity, rate, cost, period, now)
  local allowed = tokens >= cost
  local after = tokens
  if allowed then after = tokens - cost end
  local reset_at = now
  if rate > 0 then reset_at = now + math.ceil((capacity - after) / rate) end
  local retry_after = 0
  if not allowed then
    if rate > 0 and cost <= capacity then
      retry_after = math.max(1, math.ceil((cost - tokens) / rate))
    else
      -- No share right now (or the cost exceeds capacity): try again next epoch.
      retry_after = math.max(1, (math.floor(now / period) + 1) * period - now)
      reset_at = now + retry_after
    end
  end
  return allowed, after, reset_at, retry_after
end

--- @include "includes/silent_bucket"
--- @include "includes/loud_bucket"

local function federated_bucket(rule, ctx, now)
  local p = decide_params(rule, ctx)
  -- A silent key (silent_bucket.lua) is decided in scalars from one short read.
  local tokens, capacity, rate, store, gossip, false_denial, touch, quota = silent_bucket(p, rule, ctx.fence, now)
  if tokens ~= nil then return tokens, capacity, rate, store, gossip, false_denial, touch, quota end
  -- A loud hash: silent_bucket answered nil and, as its second and third values, the HGETALL reply it read and its
  -- map. Decided in scalars from them (loud_bucket.lua) when it can be, else from load_bucket's view.
  local flat, map = capacity, rate
  if flat ~= nil then
    local loud_tokens, loud_capacity, loud_rate, loud_store, loud_gossip, loud_false, loud_touch, loud_quota, loud_skips =
      loud_bucket(p, rule, ctx.fence, now, flat, map)
    if loud_tokens ~= nil then
      return loud_tokens, loud_capacity, loud_rate, loud_store, loud_gossip, loud_false, loud_touch, loud_quota, loud_skips
    end
  end
  local state, bucket = load_bucket(p, rule.key, true, now, flat)
  local verdict = decide_bucket(p, bucket, ctx.fence, now, rule.cost)
  local share = share_at(p, verdict.bucket.slots, ctx.fence, now)
  local function store()
    store_admission(p, state, commit_bucket(p, verdict, ctx.fence, now, rule.cost), slot_index(math.floor(now / p.period)))
  end
  -- A false denial of a stored bucket is demand (protocol decideBucket): this region's t in the epoch, after the
  -- bucket is refilled to now (the slot the epoch takes may hold an older epoch the refill still integrates).
  local touch = nil
  if bucket ~= nil then
    touch = function()
      local epoch = math.floor(now / p.period)
      local k = slot_index(epoch)
      local slots = verdict.bucket.slots
      if slots[k].id ~= epoch then slots[k] = empty_slot(p.n, epoch, false) end
      slots[k].t[p.self] = math.max(slots[k].t[p.self], now)
      store_bucket(p, state, { tokens = verdict.tokens, last = now, sig = share_at(p, slots, ctx.fence, now), slots = slots })
    end
  end
  -- How an admission goes to the peers (admission_gossip.lua), from the bucket before it.
  -- (A peer that showed in the epoch before talks too: protocol bucketAdmissionGossip.)
  local epoch = math.floor(now / rule.period)
  local cells = epoch_cells(p, verdict.bucket.slots, epoch)
  local capacity = bucket_capacity(p, share)
  local talks = peer_talks(cells, p.n, p.self) or peer_talks(epoch_cells(p, verdict.bucket.slots, epoch - 1), p.n, p.self)
  local gossip = admission_gossip(talks, cells.c[p.self], capacity - verdict.tokens,
    cells.t[p.self], verdict.tokens - rule.cost, capacity, rule.cost, silent_share(p), p.horizon, now)
  -- The peers a round report skips (bystanders): an admission changes only this region's cells of the epoch.
  local skips = report_skips(cells, p.units, p.n, p.self)
  return verdict.tokens, capacity, bucket_rate(p, share), store, gossip, verdict.false_denial == true, touch, verdict.quota,
    skips
end

local function token_bucket(rule, ctx, now)
  local cost, period = rule.cost, rule.period
  if ctx.n == 1 then return single_region_bucket(rule, now) end
  local tokens, capacity, rate, store, gossip, false_denial, touch, quota, skips = federated_bucket(rule, ctx, now)
  local allowed, after, reset_at, retry_after = bucket_verdict(tokens, capacity, rate, cost, period, now)
  local remaining = math.max(0, math.floor(after))
  -- (Both federated paths answer the federation's remaining quota; none known, it is this region's remaining.)
  if quota == nil then quota = remaining end
  return {
    allowed = allowed,
    remaining = remaining,
    quota = quota,
    reset_at = reset_at,
    retry_after = retry_after,
    federated = true,
    gossip = gossip,
    -- The peers a round report skips (admission_gossip.lua report_skips), nil for none.
    report_skips = skips,
    false_denial = false_denial == true,
    commit = store,
    touch = touch,
  }
end
