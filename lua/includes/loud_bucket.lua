--[[
  A loud token bucket decided in scalars (decide.lua's decide_loud, then token_bucket.lua, try it when
  silent_bucket.lua finds a loud hash): the decision load_bucket's view and decide_bucket give, read straight from the
  key's HGETALL reply (its map, federation.lua hash_map, which the silent test built) without building the slots. It
  reads what the decision's read plan reads (load_bucket: every slot's id and its transfers to and from this region,
  every region's count of the epoch of `now` and of the one before, this region's admission time in the epoch) and
  computes bucket_share.lua's share_at, refill, bucketQuotaRemaining and bucketFalseDenial and admission_gossip.lua's
  gossip class and report skips with the same float operations in the same order (a cell the plan does not read is 0
  there and here). It answers an admission whose epoch's slot already holds the epoch and a denial that is not false;
  anything else (no tokens, an unbounded rule, the first admission of an epoch in its slot, a false denial) returns
  nil, and load_bucket's view decides it. The differential test (test/federation/differential.test.ts) decides every
  loud key of its schedules through here against protocol.ts.
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

--[[
  The cells of epoch e that the loud view reads, for region r of n, from `f` (the hash as name -> text) whose slot k
  holds epoch ids[k]: every region's count summed (sum_counts), r's net transfer (bucket_share.lua net_transfer(e, r)),
  what r gave net (netted_given(e)) and whether a peer talks in it (a count, or a transfer with r, non-zero), each
  summed in the order of the general view's loops. All 0 (and no talk) when no slot holds e.
]]
local function loud_epoch(f, names, ids, n, r, e)
  local s = slot_index(e)
  if ids[s] ~= e then return 0, 0, 0, false end
  local counts, transfers = names.c[s], names.x[s]
  local sum, net, given, talks = 0, 0, 0, false
  for o = 0, n - 1 do
    local count = number_of(f[counts[o]]) or 0
    sum = sum + count
    if o ~= r then
      local to_r, from_r = number_of(f[transfers[o][r]]) or 0, number_of(f[transfers[r][o]]) or 0
      net = net + (to_r - from_r)
      if from_r - to_r > 0 then given = given + (from_r - to_r) end
      if count ~= 0 or to_r ~= 0 or from_r ~= 0 then talks = true end
    end
  end
  return sum, net, given, talks
end

--[[
  The loud view's share at t (bucket_share.lua share_at over its slots), as refill_over asks it: `view` holds the
  hash's cells and the epoch of `now` with its net transfer and the net given in the epoch before it (the epochs a
  decision asks about most), any other epoch read from the cells.
]]
local function loud_share_of(p, view, _, t)
  if t < view.fence_end then return 0 end
  local e = math.floor(t / p.period)
  local net, given
  if e == view.epoch then
    net = view.net
  else
    _, net = loud_epoch(view.f, view.names, view.ids, p.n, p.self, e)
  end
  local share = p.units[p.self] + net
  if t - e * p.period < p.skew then
    if e == view.epoch then
      given = view.given_before
    else
      _, _, given = loud_epoch(view.f, view.names, view.ids, p.n, p.self, e - 1)
    end
    share = share - given
  end
  -- (math.max(0, share) as a comparison: the same double.)
  if share > 0 then return share end
  return 0
end

-- Region r's transfers with peer o in a slot's cells `transfers` (names.x[k]), read from `f`: to r, from r.
local function peer_transfers(f, transfers, r, o)
  return number_of(f[transfers[o][r]]) or 0, number_of(f[transfers[r][o]]) or 0
end

-- A denial's write: none.
local function no_write() end

-- The view loud_share_of reads, one table for every decision (refill_over and the share are done with it before
-- loud_bucket returns): no table per decision for the slots, the epoch cells or the share.
local loud_view = { ids = {}, sig_text = last_text(fmt), now_text = last_text(fmt) }

local function loud_bucket(p, rule, fence, now, flat, map)
  if p.unbounded then return nil end
  local n, r, P, cost = p.n, p.self, p.period, rule.cost
  local names = loud_names_of(n, r)
  -- The hash as name -> text (`map`, when the silent test built it).
  local f = map or hash_map(flat)
  local stored = number_of(f.tokens)
  if stored == nil then return nil end
  local epoch = math.floor(now / P)
  local k = slot_index(epoch)
  local view = loud_view
  local ids = view.ids
  local latest = -1
  for s = 0, KEPT_WINDOWS - 1 do
    ids[s] = number_of(f[names.w[s]]) or -1
    if ids[s] > latest then latest = ids[s] end
  end
  local v = silent_view(p, fence)
  local fence_end = v.fence_end
  local used, net, _, talks = loud_epoch(f, names, ids, n, r, epoch)
  local before, _, given_before, talked = loud_epoch(f, names, ids, n, r, epoch - 1)
  view.f, view.names, view.epoch, view.net, view.given_before, view.fence_end = f, names, epoch, net, given_before, fence_end
  local tokens = refill_over(p, loud_share_of, view, fence, stored, number_of(f.last_refill) or 0, latest, now)
  local share = loud_share_of(p, view, fence, now)
  view.f = nil
  local capacity = bucket_capacity(p, share)
  local allowed = tokens >= cost
  -- An admission writes this region's cells of the epoch's slot in place (store_admission); a first admission of
  -- the epoch in its slot starts the slot anew: load_bucket's view.
  local own_c, own_t = 0, 0
  if ids[k] == epoch then
    own_c, own_t = number_of(f[names.c[k][r]]) or 0, number_of(f[names.t[k]]) or 0
  end
  if allowed and (ids[k] ~= epoch or own_c + cost == 0 or (own_t > now and own_t or now) == 0) then return nil end
  -- bucketQuotaRemaining and, for a denial, bucketFalseDenial (bucket_share.lua).
  local remaining, admitted = tokens, 0
  if allowed then remaining, admitted = tokens - cost, cost end
  local quota = bucket_quota_of(p, fence, now, remaining, admitted, used, before)
  -- This region's transfers with its peers in the epoch's slot (none when the slot holds another epoch).
  local transfers = names.x[k]
  if not allowed then
    if now >= fence_end then
      -- A peer holds share (its net_transfer has only the cells with this region at one end).
      local peers_hold = false
      for d = 0, n - 1 do
        if d ~= r then
          local to_r, from_r = 0, 0
          if ids[k] == epoch then to_r, from_r = peer_transfers(f, transfers, r, d) end
          if p.units[d] + (from_r - to_r) > 0 then peers_hold = true end
        end
      end
      -- A false denial: load_bucket's view decides it (it touches the bucket and calls the peers).
      if peers_hold and used + cost <= bucket_room(p, now, before) then return nil end
    end
    return tokens, capacity, bucket_rate(p, share), no_write, 'silent', false, nil, quota
  end
  -- The gossip class (token_bucket.lua federated_bucket, admission_gossip.lua) and the report's bystanders.
  local gossip = admission_gossip(talks or talked, own_c, capacity - tokens, own_t, tokens - cost, capacity, cost, v.silent,
    p.horizon, now)
  -- (An admission here is in an epoch its slot holds: ids[k] == epoch.)
  local skips = nil
  for o = 0, n - 1 do
    if o ~= r then
      local to_r, from_r = peer_transfers(f, transfers, r, o)
      if (number_of(f[names.c[k][o]]) or 0) == 0 and from_r == 0 and to_r >= p.units[o] then
        if skips == nil then skips = {} end
        skips[o] = true
      end
    end
  end
  -- store_admission's write: tokens, last_refill, sig (the share at `now`: an admission moves no share) and this
  -- region's c and t of the slot.
  local function store()
    local own = own_slot_names(r, k)
    -- The admission's time is last_refill's too (math.max(own_t, now): the same double); a batch's decisions share
    -- their clock, and the share is mostly the last one stored: loud_view keeps the texts of both.
    local now_text = loud_view.now_text(now)
    local at_text = now_text
    if own_t > now then at_text = fmt(own_t) end
    redis.call('HSET', rule.key, 'tokens', fmt(tokens - cost), 'last_refill', now_text,
      'sig', loud_view.sig_text(share), own[1], fmt(own_c + cost), own[2], at_text)
    redis.call('PEXPIRE', rule.key, v.ttl_text)
  end
  return tokens, capacity, bucket_rate(p, share), store, gossip, false, nil, quota, skips
end
