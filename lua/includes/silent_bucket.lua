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
  GET: silent_string.lua's hint): z, tokens, last_refill, sig, the slot ids, this region's c and t
  of the current epoch's slot and its c of the previous epoch's. Returns nil and that HGETALL reply when the key
  holds state without z (the general path decides it from the reply), else what federated_bucket returns.
]]
-- The silent view's share, capacity and rate (bucket_share.lua share_at, bucket_capacity, bucket_rate): `v` holds
-- units (σ outside the fence span), b (this region's budget part), fence_end, C, L and P.
local function silent_share_at(v, t)
  if t < v.fence_end then return 0 end
  return v.units
end
local function silent_capacity(v, s) return (v.C * s) / SHARE_UNITS + v.b end
local function silent_rate(v, s) return (v.L * s) / (v.P * SHARE_UNITS) end

-- bucket_share.lua refill, over the same segments (the share is constant on each; their edges split the float sums).
local function silent_refill(p, v, fence, tokens, t, latest, now)
  if now <= t then return math.min(tokens, silent_capacity(v, silent_share_at(v, now))) end
  local settles = math.max(v.fence_end, (latest + 2) * v.P + p.skew)
  local segment = 0
  while segment < MAX_REFILL_SEGMENTS and t < now and t < settles do
    local stop = math.min(now, next_share_change(p, fence, t))
    local s = silent_share_at(v, t)
    tokens = math.min(silent_capacity(v, s), tokens + (stop - t) * silent_rate(v, s))
    t = stop
    segment = segment + 1
  end
  local s = silent_share_at(v, now)
  if t < now and t >= settles then tokens = math.min(silent_capacity(v, s), tokens + (now - t) * silent_rate(v, s)) end
  return math.min(tokens, silent_capacity(v, s))
end

-- The names silent_bucket reads from a hash (a field_list), once per library load: z, tokens, last_refill, sig, the
-- slot ids, region r's c and t of slot k and its c of the slot before (own_slot_names).
local bucket_silent_names = {}
local function bucket_silent_names_of(r, k)
  local row = memo_row(bucket_silent_names, r)
  local names = row[k]
  if names == nil then
    local own = own_slot_names(r, k)
    names = field_list({ 'z', 'tokens', 'last_refill', 'sig', 'w0', 'w1', 'w2', own[1], own[2], own[3] })
    row[k] = names
  end
  return names
end

local function silent_bucket(p, rule, fence, now)
  -- An unbounded rule's share is the whole (share_at), and its keys are never silent (admission_gossip).
  if p.unbounded then return nil end
  local r, P, C, L, cost = p.self, p.period, p.capacity, p.limit, rule.cost
  local epoch = math.floor(now / P)
  local k, kp = slot_index(epoch), slot_index(epoch - 1)
  local names = own_slot_names(r, k)
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
  local held, flat
  if values ~= nil then
    -- HMGET's reply for the string: z = 1, then as bucket_silent_names_of's names ask.
    held = { '1', silent_field(values, 2), silent_field(values, 3), silent_field(values, 4), silent_field(values, 5),
      silent_field(values, 6), silent_field(values, 7), silent_field(values, 8 + 2 * k), silent_field(values, 9 + 2 * k),
      silent_field(values, 8 + 2 * kp) }
  else
    held, flat = silent_hash_read(rule.key, bucket_silent_names_of(r, k), read)
    if held == nil then return nil, flat end
  end
  local id0, id1, id2 = tonumber(held[5]) or -1, tonumber(held[6]) or -1, tonumber(held[7]) or -1
  local held_k, held_kp = id0, id0
  if k == 1 then held_k = id1 elseif k == 2 then held_k = id2 end
  if kp == 1 then held_kp = id1 elseif kp == 2 then held_kp = id2 end
  -- This region's cells of the epoch of `now` and of the one before (0 when their slot holds another epoch).
  local slot_c, slot_t = tonumber(held[8]) or 0, tonumber(held[9]) or 0
  local stored = tonumber(held[2])
  local used, last_at, before = 0, 0, 0
  -- (A key with no tokens decides as a new bucket, on empty slots.)
  if stored ~= nil and held_k == epoch then used, last_at = slot_c, slot_t end
  if stored ~= nil and held_kp == epoch - 1 then before = tonumber(held[10]) or 0 end

  local v = { units = p.units[r], b = bucket_budget(p), fence_end = bucket_fence_end(p, fence), C = C, L = L, P = P }
  local tokens
  if stored ~= nil then
    tokens = silent_refill(p, v, fence, stored, tonumber(held[3]) or 0, math.max(id0, id1, id2), now)
  elseif fence > 0 and fence <= now then
    -- new_bucket after a data loss: empty at the fence, refilled since (its slots are empty: latest -1).
    tokens = silent_refill(p, v, fence, silent_refill(p, v, fence, 0, fence, -1, now), now, -1, now)
  else
    tokens = silent_capacity(v, silent_share_at(v, now))
  end

  local sigma = silent_share_at(v, now)
  local cap = silent_capacity(v, sigma)
  -- bucketQuotaRemaining and bucketFalseDenial over this region's counts alone.
  local carried = math.max(0, math.min(C, L) - before)
  local elapsed_refill = (L * (now - epoch * P)) / P
  local allowed = tokens >= cost
  local remaining, admitted = tokens, 0
  if allowed then remaining, admitted = tokens - cost, cost end
  local verdict_quota = math.max(0, math.floor(remaining))
  if now >= v.fence_end then
    local held_global = math.min(C, carried + elapsed_refill)
    verdict_quota = math.max(verdict_quota, math.min(C, math.max(0, math.floor(held_global - (used + admitted)))))
  end
  local false_denial = not allowed and now >= v.fence_end and used + cost <= carried + elapsed_refill

  -- The epoch's slot after a write: this region's cells (a slot holding an older epoch starts from zeros).
  local ttl = federated_bucket_ttl(P, p.skew, C, p.budget, L)
  local function store(count, at, after)
    if values ~= nil then
      -- The string: every field as the hash's write below leaves it (a zero cell is an absent field).
      values[2], values[3], values[4] = fmt(after), fmt_count(now), fmt_count(sigma)
      values[5 + k] = fmt_count(epoch)
      values[8 + 2 * k] = count == 0 and '' or fmt_count(count)
      values[9 + 2 * k] = at == 0 and '' or fmt_count(at)
      redis.call('SET', rule.key, silent_string_text(values), 'PX', ttl)
      return
    end
    -- (Whole numbers written with %d: the same text as fmt's %.17g, at half the cost.)
    local sets = { 'tokens', fmt(after), 'last_refill', fmt_count(now) }
    if tonumber(held[4]) ~= sigma then
      sets[#sets + 1] = 'sig'
      sets[#sets + 1] = fmt_count(sigma)
    end
    if held[1] == false then
      sets[#sets + 1] = 'z'
      sets[#sets + 1] = '1'
    end
    local dels = {}
    if held_k ~= epoch then
      sets[#sets + 1] = names[4]
      sets[#sets + 1] = fmt_count(epoch)
    end
    silent_cell(sets, dels, names[1], count, slot_c, fmt_count)
    silent_cell(sets, dels, names[2], at, slot_t, fmt_count)
    if #dels > 0 then redis.call('HDEL', rule.key, unpack(dels)) end
    redis.call('HSET', rule.key, unpack(sets))
    redis.call('PEXPIRE', rule.key, ttl)
  end
  local function commit()
    store(used + cost, math.max(last_at, now), tokens - cost)
  end
  -- A false denial of a stored bucket refreshes this region's t in the epoch (token_bucket.lua's touch).
  local touch = nil
  if stored ~= nil then
    touch = function() store(used, math.max(last_at, now), tokens) end
  end
  local gossip = admission_gossip(false, used, cap - tokens, last_at, tokens - cost, cap, cost, silent_share(p), p.horizon, now)
  return tokens, cap, silent_rate(v, sigma), commit, gossip, false_denial, touch, verdict_quota
end
