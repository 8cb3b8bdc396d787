--[[
  A silent token bucket decided in scalars (token_bucket.lua tries it first). A silent key (federation.lua
  load_silent: field z) holds no cell of another region and no transfer, so its view's share is the base
  σ_r = units[r] outside the fence's zero span and every sum over the regions is this region's own count.
  This is bucket_share.lua's decideBucket, refill, bucketQuotaRemaining and bucketFalseDenial for that view,
  with the same float operations in the same order (adding the zeros of the other cells changes no double),
  without building the slots: the differential test (test/federation/differential.test.ts) runs every new key
  through here against protocol.ts.

  Reads one GET: a new key or this region's silent string (silent_string.lua), written back with one SET PX. A
  hash is read with one HGETALL (silent_hash_read; a key found to be a hash lately is read so at once, without the
  GET: silent_string.lua's hint): z, tokens, last_refill, sig, the slot ids, this region's c and t of the current
  epoch's slot and its c of the previous epoch's. Returns nil, that HGETALL reply and its map (federation.lua
  hash_map) when the key holds state without z (decide_loud or the general path decides it from them), else what
  federated_bucket returns.
]]

-- The names silent_bucket reads from a hash, once per library load: z, tokens, last_refill, sig, the slot ids, region
-- r's c and t of slot k and its c of the slot before (own_slot_names).
local bucket_silent_names = {}
local function bucket_silent_names_of(r, k)
  local row = memo_row(bucket_silent_names, r)
  local names = row[k]
  if names == nil then
    local own = own_slot_names(r, k)
    names = { 'z', 'tokens', 'last_refill', 'sig', 'w0', 'w1', 'w2', own[1], own[2], own[3] }
    row[k] = names
  end
  return names
end

-- The silent view of a rule at a fence (its share, bucket_share.lua share_at: units, and 0 before fence_end; the
-- key's TTL after a write and the silent share): the same for every call of a batch run that shares the rule, so
-- kept on its params per fence.
local function silent_view(p, fence)
  local v = p.silent_view
  if v == nil or v.fence ~= fence then
    local units = p.units[p.self]
    local ttl = federated_bucket_ttl(p.period, p.skew, p.capacity, p.budget, p.limit)
    -- The TTL also as the text SET PX and PEXPIRE are given (a number argument costs Redis a %.14g each call).
    v = { fence = fence, units = units, fence_end = bucket_fence_end(p, fence), ttl_text = fmt(ttl),
      silent = silent_share(p),
      -- bucket_capacity and bucket_rate of the view's two shares (units, and 0 in the fence's span): the same
      -- expressions of the same numbers, so the same doubles as computing them at each use.
      cap_units = bucket_capacity(p, units), rate_units = bucket_rate(p, units),
      cap_zero = bucket_capacity(p, 0), rate_zero = bucket_rate(p, 0) }
    p.silent_view = v
  end
  return v
end

--[[
  bucket_share.lua refill_over for the silent view (σ at t: 0 before the view's fence_end, else units), in
  scalars: the same segments (its loop and next_share_change at the view's fence), and in each the same
  float operations in the same order, with the view's capacity and rate of the segment's share (0 or units)
  instead of calling for them.
]]
-- (math.min and math.max written out as comparisons: the same doubles, bucket_share.lua bucket_room says why.)
local function silent_refill(p, v, tokens, t, latest, now)
  local fence_end = v.fence_end
  local cap, rate = v.cap_units, v.rate_units
  if now < fence_end then cap, rate = v.cap_zero, v.rate_zero end
  if now <= t then
    if cap < tokens then return cap end
    return tokens
  end
  local settles = (latest + 2) * p.period + p.skew
  if fence_end > settles then settles = fence_end end
  local segment = 0
  while segment < MAX_REFILL_SEGMENTS and t < now and t < settles do
    local stop = next_share_change(p, v.fence, t)
    if now < stop then stop = now end
    local refilled, capped
    if t < fence_end then
      capped, refilled = v.cap_zero, tokens + (stop - t) * v.rate_zero
    else
      capped, refilled = v.cap_units, tokens + (stop - t) * v.rate_units
    end
    if refilled < capped then capped = refilled end
    tokens = capped
    t = stop
    segment = segment + 1
  end
  if t < now and t >= settles then
    local refilled = tokens + (now - t) * rate
    tokens = cap
    if refilled < tokens then tokens = refilled end
  end
  if cap < tokens then return cap end
  return tokens
end

--[[
  A silent bucket's write: this region's count and admission time of the epoch's slot and the tokens after, into the
  key as it was read (`s`, silent_bucket_state's): its string with one SET PX, or its hash.
]]
local function silent_store(s, count, at, after)
  local k, epoch, now = s.k, s.epoch, s.now
  local values = s.values
  if values ~= nil then
    -- The string: every field as the hash's write below leaves it (a zero cell is an absent field).
    values[2], values[3], values[4] = after, now, s.sigma
    values[5 + k] = epoch
    values[8 + 2 * k] = count ~= 0 and count
    values[9 + 2 * k] = at ~= 0 and at
    redis.call('SET', s.key, silent_string_packed(values, k), 'PX', s.ttl_text)
    return
  end
  local held, names = s.held, s.names
  local sets = { 'tokens', fmt(after), 'last_refill', fmt(now) }
  if tonumber(held[4]) ~= s.sigma then
    sets[#sets + 1] = 'sig'
    sets[#sets + 1] = fmt(s.sigma)
  end
  if held[1] == false then
    sets[#sets + 1] = 'z'
    sets[#sets + 1] = '1'
  end
  local dels = {}
  if s.held_k ~= epoch then
    sets[#sets + 1] = names[4]
    sets[#sets + 1] = fmt(epoch)
  end
  silent_cell(sets, dels, names[1], count, s.slot_c)
  silent_cell(sets, dels, names[2], at, s.slot_t)
  if #dels > 0 then redis.call('HDEL', s.key, unpack(dels)) end
  redis.call('HSET', s.key, unpack(sets))
  redis.call('PEXPIRE', s.key, s.ttl_text)
end

-- The admission's write (token_bucket.lua's commit).
local function silent_commit(s)
  local at = s.last_at
  if s.now > at then at = s.now end
  silent_store(s, s.used + s.cost, at, s.tokens - s.cost)
end

-- A false denial of a stored bucket refreshes this region's t in the epoch (token_bucket.lua's touch).
local function silent_touch(s)
  silent_store(s, s.used, math.max(s.last_at, s.now), s.tokens)
end

--[[
  The silent decision's state, without closures (decide.lua's decide_silent commits it with silent_commit): a table
  with tokens, cap, rate, gossip, false_denial, quota and what silent_store writes with; stored says whether the key
  held a bucket (a touch needs one). nil, the HGETALL reply and its map when the key is a loud hash, nil alone for an
  unbounded rule.
]]
local function silent_bucket_state(p, rule, fence, now, into)
  -- An unbounded rule's share is the whole (share_at), and its keys are never silent (admission_gossip).
  if p.unbounded then return nil end
  local r, P, C, L, cost = p.self, p.period, p.capacity, p.limit, rule.cost
  local epoch = math.floor(now / P)
  local k, kp = slot_index(epoch), slot_index(epoch - 1)
  -- The key's one string (silent_string.lua: absent, or this region's silent string), else its hash. Another
  -- region's string (the regions were renumbered), a window's or a single region's number (gcra.lua, this region
  -- before it federated the rule): the hash they stand for, from now on.
  local values, other, read
  if rule.hash_read ~= nil then
    -- decide_silent (decide.lua) read this key's hash a moment ago in the same call and found it loud: that reply.
    -- (It clears the field before each of its reads, so a reply never outlives the call that read it.)
    read = rule.hash_read
    rule.hash_read = nil
  else
    values, other, read = own_silent_values(rule.key, label(r), silent_string_values)
  end
  if other and not gcra_to_hash(rule.key, C, L, P, now) then error('unreadable token bucket state at ' .. rule.key) end
  -- The fields as HMGET answers bucket_silent_names_of's names (z, tokens, last_refill, sig, w0, w1, w2, this region's
  -- c and t of slot k and c of slot kp), read as numbers: tonumber of an absent field (false in the string and in
  -- the hash) is nil.
  local held, names = nil, nil
  local stored, last_refill, w0, w1, w2, slot_c, slot_t, before_c
  if values ~= nil then
    -- A value is a number, false (absent: nil) or the text '-0' (silent_string.lua: how a string keeps a -0):
    -- tonumber of it, called only for the last two (a number is its own tonumber; the call costs three comparisons).
    stored, last_refill = values[2], values[3]
    if stored == false or stored == '-0' then stored = tonumber(stored) end
    if last_refill == false or last_refill == '-0' then last_refill = tonumber(last_refill) end
    w0, w1, w2 = values[5], values[6], values[7]
    if w0 == false or w0 == '-0' then w0 = tonumber(w0) end
    if w1 == false or w1 == '-0' then w1 = tonumber(w1) end
    if w2 == false or w2 == '-0' then w2 = tonumber(w2) end
    slot_c, slot_t, before_c = values[8 + 2 * k], values[9 + 2 * k], values[8 + 2 * kp]
    if slot_c == false or slot_c == '-0' then slot_c = tonumber(slot_c) end
    if slot_t == false or slot_t == '-0' then slot_t = tonumber(slot_t) end
    if before_c == false or before_c == '-0' then before_c = tonumber(before_c) end
  else
    local flat, map
    held, flat, map = silent_hash_read(rule.key, bucket_silent_names_of(r, k), read)
    if held == nil then return nil, flat, map end
    names = own_slot_names(r, k)
    stored, last_refill = tonumber(held[2]), tonumber(held[3])
    w0, w1, w2 = tonumber(held[5]), tonumber(held[6]), tonumber(held[7])
    slot_c, slot_t, before_c = tonumber(held[8]), tonumber(held[9]), tonumber(held[10])
  end
  local id0, id1, id2 = w0 or -1, w1 or -1, w2 or -1
  local held_k, held_kp = id0, id0
  if k == 1 then held_k = id1 elseif k == 2 then held_k = id2 end
  if kp == 1 then held_kp = id1 elseif kp == 2 then held_kp = id2 end
  -- This region's cells of the epoch of `now` and of the one before (0 when their slot holds another epoch).
  slot_c, slot_t = slot_c or 0, slot_t or 0
  local used, last_at, before = 0, 0, 0
  -- (A key with no tokens decides as a new bucket, on empty slots.)
  if stored ~= nil and held_k == epoch then used, last_at = slot_c, slot_t end
  if stored ~= nil and held_kp == epoch - 1 then before = before_c or 0 end

  local v = silent_view(p, fence)
  local fence_end = v.fence_end
  local tokens
  if stored ~= nil then
    local latest = id0
    if id1 > latest then latest = id1 end
    if id2 > latest then latest = id2 end
    tokens = silent_refill(p, v, stored, last_refill or 0, latest, now)
  elseif fence > 0 and fence <= now then
    -- new_bucket after a data loss: empty at the fence, refilled since (its slots are empty: latest -1).
    tokens = silent_refill(p, v, silent_refill(p, v, 0, fence, -1, now), now, -1, now)
  elseif now < fence_end then
    tokens = v.cap_zero
  else
    tokens = v.cap_units
  end

  -- σ at now (share_at) and its capacity and rate (bucket_capacity, bucket_rate).
  local sigma, cap, rate = v.units, v.cap_units, v.rate_units
  if now < fence_end then sigma, cap, rate = 0, v.cap_zero, v.rate_zero end
  -- bucketQuotaRemaining (bucket_quota_of) and bucketFalseDenial over this region's counts alone, on one
  -- bucket_room.
  local allowed = tokens >= cost
  local remaining, admitted = tokens, 0
  if allowed then remaining, admitted = tokens - cost, cost end
  local verdict_quota, false_denial
  if now >= fence_end then
    local room = bucket_room(p, now, before)
    verdict_quota = bucket_quota_at_room(p, remaining, admitted, used, room)
    false_denial = not allowed and used + cost <= room
  else
    verdict_quota, false_denial = math.max(0, math.floor(remaining)), false
  end
  local gossip = admission_gossip(false, used, cap - tokens, last_at, tokens - cost, cap, cost, v.silent, p.horizon, now)
  -- Into `into` when given (decide.lua's decide_silent, which is done with it before its next call), else a new table
  -- (silent_bucket's commit and touch keep theirs until the call commits).
  local state = into or {}
  state.tokens, state.cap, state.rate, state.gossip, state.false_denial = tokens, cap, rate, gossip, false_denial
  state.quota, state.stored = verdict_quota, stored ~= nil
  -- What silent_store writes with.
  state.key, state.values, state.held, state.names, state.k, state.epoch = rule.key, values, held, names, k, epoch
  state.now, state.sigma, state.held_k, state.slot_c, state.slot_t = now, sigma, held_k, slot_c, slot_t
  state.used, state.last_at, state.cost, state.ttl_text = used, last_at, cost, v.ttl_text
  return state
end

-- silent_bucket_state as federated_bucket (token_bucket.lua) takes it: tokens, capacity, rate, commit, gossip,
-- false_denial, touch (nil without a stored bucket) and quota; nil, the HGETALL reply and its map for a loud hash.
local function silent_bucket(p, rule, fence, now)
  local s, flat, map = silent_bucket_state(p, rule, fence, now)
  if s == nil then return nil, flat, map end
  local touch = nil
  if s.stored then touch = function() silent_touch(s) end end
  return s.tokens, s.cap, s.rate, function() silent_commit(s) end, s.gossip, s.false_denial, touch, s.quota
end
