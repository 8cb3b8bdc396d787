--[[
  A loud token bucket decided in scalars (token_bucket.lua tries it when silent_bucket.lua finds a loud hash): the
  decision load_bucket's view and decide_bucket give, read straight from the key's HGETALL reply without building
  the slots. It reads what the decision's read plan reads (load_bucket: every slot's id and its transfers to and
  from this region, every region's count of the epoch of `now` and of the one before, this region's admission time
  in the epoch) and computes bucket_share.lua's share_at, refill, bucketQuotaRemaining and bucketFalseDenial and
  admission_gossip.lua's gossip class and report skips with the same float operations in the same order (a cell
  the plan does not read is 0 there and here). It answers an admission whose epoch's slot already holds the epoch
  and a denial that is not false; anything else (no tokens, an unbounded rule, the first admission of an epoch in
  its slot, a false denial) returns nil, and load_bucket's view decides it. The differential test
  (test/federation/differential.test.ts) decides every loud key of its schedules through here against protocol.ts.
]]

-- The names the loud view reads for region r of n, once per library load: per slot k its id (w), every region's
-- count (c[k][o]), r's admission time (t[k]) and the transfers with r at one end (x[k][o][d], nil otherwise).
local loud_names = {}
local function loud_names_of(n, r)
  local row = memo_row(loud_names, n)
  local names = row[r]
  if names == nil then
    names = { w = {}, c = {}, t = {}, x = {} }
    for k = 0, KEPT_WINDOWS - 1 do
      local slot = tostring(k) .. '.'
      names.w[k] = 'w' .. tostring(k)
      names.t[k] = 't' .. slot .. tostring(r)
      names.c[k], names.x[k] = {}, {}
      for o = 0, n - 1 do
        names.c[k][o] = 'c' .. slot .. tostring(o)
        names.x[k][o] = {}
        for d = 0, n - 1 do
          if (o == r) ~= (d == r) then names.x[k][o][d] = 'x' .. slot .. tostring(o) .. '.' .. tostring(d) end
        end
      end
    end
    row[r] = names
  end
  return names
end

-- The loud view's share as refill_over (bucket_share.lua) asks it: the view is its share_at.
local function loud_share_of(_, share_at_t, _, t)
  return share_at_t(t)
end

local function loud_bucket(p, rule, fence, now, flat)
  if p.unbounded then return nil end
  local n, r, P, skew, cost = p.n, p.self, p.period, p.skew, rule.cost
  local names = loud_names_of(n, r)
  -- The hash as name -> text.
  local f = {}
  for j = 1, #flat, 2 do f[flat[j]] = flat[j + 1] end
  local stored = tonumber(f.tokens)
  if stored == nil then return nil end
  local epoch = math.floor(now / P)
  local k = slot_index(epoch)
  local ids = {}
  local latest = -1
  for s = 0, KEPT_WINDOWS - 1 do
    ids[s] = tonumber(f[names.w[s]]) or -1
    latest = math.max(latest, ids[s])
  end
  -- x[o][d] of the slot holding epoch e, 0 when no slot holds it or the plan does not read the cell.
  local function x(e, o, d)
    local s = slot_index(e)
    if ids[s] ~= e then return 0 end
    local name = names.x[s][o][d]
    if name == nil then return 0 end
    return tonumber(f[name]) or 0
  end
  -- c[o] of epoch e (a count of epoch e or e - 1: the plan reads both).
  local function c(e, o)
    local s = slot_index(e)
    if ids[s] ~= e then return 0 end
    return tonumber(f[names.c[s][o]]) or 0
  end
  -- net_transfer and netted_given (bucket_share.lua) of epoch e for region d.
  local function net_transfer(e, d)
    local net = 0
    for o = 0, n - 1 do
      if o ~= d then net = net + (x(e, o, d) - x(e, d, o)) end
    end
    return net
  end
  local function netted_given(e)
    local total = 0
    for d = 0, n - 1 do
      if d ~= r then total = total + math.max(0, x(e, r, d) - x(e, d, r)) end
    end
    return total
  end
  local function sum_counts(e)
    local total = 0
    for o = 0, n - 1 do total = total + c(e, o) end
    return total
  end
  local v = silent_view(p, fence)
  local fence_end = v.fence_end
  -- share_at (bucket_share.lua) of this view.
  local function share_at_t(t)
    if t < fence_end then return 0 end
    local e = math.floor(t / P)
    local share = p.units[r] + net_transfer(e, r)
    if t - e * P < skew then share = share - netted_given(e - 1) end
    return math.max(0, share)
  end
  local tokens = refill_over(p, loud_share_of, share_at_t, fence, stored, tonumber(f.last_refill) or 0, latest, now)
  local share = share_at_t(now)
  local capacity = bucket_capacity(p, share)
  local allowed = tokens >= cost
  -- An admission writes this region's cells of the epoch's slot in place (store_admission); a first admission of
  -- the epoch in its slot starts the slot anew: load_bucket's view.
  local own_c, own_t = c(epoch, r), 0
  if ids[k] == epoch then own_t = tonumber(f[names.t[k]]) or 0 end
  if allowed and (ids[k] ~= epoch or own_c + cost == 0 or math.max(own_t, now) == 0) then return nil end
  -- bucketQuotaRemaining and, for a denial, bucketFalseDenial (bucket_share.lua).
  local remaining, admitted = tokens, 0
  if allowed then remaining, admitted = tokens - cost, cost end
  local used, before = sum_counts(epoch), sum_counts(epoch - 1)
  local quota = bucket_quota_of(p, fence, now, remaining, admitted, used, before)
  if not allowed then
    if now >= fence_end then
      local peers_hold = false
      for d = 0, n - 1 do
        if d ~= r and p.units[d] + net_transfer(epoch, d) > 0 then peers_hold = true end
      end
      -- A false denial: load_bucket's view decides it (it touches the bucket and calls the peers).
      if peers_hold and used + cost <= bucket_room(p, now, before) then return nil end
    end
    return tokens, capacity, bucket_rate(p, share), function() end, 'silent', false, nil, quota
  end
  -- The gossip class (token_bucket.lua federated_bucket, admission_gossip.lua) and the report's bystanders.
  local function talks_in(e)
    for o = 0, n - 1 do
      if o ~= r and (c(e, o) ~= 0 or x(e, o, r) ~= 0 or x(e, r, o) ~= 0) then return true end
    end
    return false
  end
  local talks = talks_in(epoch) or talks_in(epoch - 1)
  local gossip = admission_gossip(talks, own_c, capacity - tokens, own_t, tokens - cost, capacity, cost, v.silent,
    p.horizon, now)
  local skips = nil
  for o = 0, n - 1 do
    if o ~= r and c(epoch, o) == 0 and x(epoch, r, o) == 0 and x(epoch, o, r) >= p.units[o] then
      if skips == nil then skips = {} end
      skips[o] = true
    end
  end
  -- store_admission's write: tokens, last_refill, sig (the share at `now`: an admission moves no share) and this
  -- region's c and t of the slot.
  local function store()
    local own = own_slot_names(r, k)
    redis.call('HSET', rule.key, 'tokens', fmt(tokens - cost), 'last_refill', fmt(now), 'sig', fmt(share),
      own[1], fmt(own_c + cost), own[2], fmt(math.max(own_t, now)))
    redis.call('PEXPIRE', rule.key, v.ttl)
  end
  return tokens, capacity, bucket_rate(p, share), store, gossip, false, nil, quota, skips
end
