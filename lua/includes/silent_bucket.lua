--[[
  A silent token bucket decided in scalars (token_bucket.lua tries it first). A silent key (federation.lua
  load_silent: field z) holds no cell of another region and no transfer, so its view's share is the base
  σ_r = units[r] outside the fence's zero span and every sum over the regions is this region's own count.
  This is bucket_share.lua's decideBucket, refill, bucketQuotaRemaining and bucketFalseDenial for that view,
  with the same float operations in the same order (adding the zeros of the other cells changes no double),
  without building the slots: the differential test (test/federation/differential.test.ts) runs every new key
  through here against protocol.ts.

  Reads one HMGET: z, tokens, last_refill, sig, the slot ids, this region's c and t of the current epoch's slot
  and its c of the previous epoch's. Returns nil when the key holds state without z (the general path decides
  it), else what federated_bucket returns.
]]
local function silent_bucket(p, rule, fence, now)
  -- An unbounded rule's share is the whole (share_at), and its keys are never silent (admission_gossip).
  if p.unbounded then return nil end
  local r, P, C, L, cost = p.self, p.period, p.capacity, p.limit, rule.cost
  local epoch = math.floor(now / P)
  local k, kp = slot_index(epoch), slot_index(epoch - 1)
  local own = '.' .. label(r)
  local kl = label(k)
  local c_field, t_field = 'c' .. kl .. own, 't' .. kl .. own
  local held = redis.call('HMGET', rule.key, 'z', 'tokens', 'last_refill', 'sig', 'w0', 'w1', 'w2', c_field, t_field,
    'c' .. label(kp) .. own)
  if held[1] == false then
    for i = 2, 10 do
      if held[i] ~= false then return nil end
    end
  end
  local ids = { [0] = tonumber(held[5]) or -1, [1] = tonumber(held[6]) or -1, [2] = tonumber(held[7]) or -1 }
  -- This region's cells of the epoch of `now` and of the one before (0 when their slot holds another epoch).
  local slot_c, slot_t = tonumber(held[8]) or 0, tonumber(held[9]) or 0
  local stored = tonumber(held[2])
  local used, last_at, before = 0, 0, 0
  -- (A key with no tokens decides as a new bucket, on empty slots.)
  if stored ~= nil and ids[k] == epoch then used, last_at = slot_c, slot_t end
  if stored ~= nil and ids[kp] == epoch - 1 then before = tonumber(held[10]) or 0 end

  local units = p.units[r]
  local b = bucket_budget(p)
  local fence_end = bucket_fence_end(p, fence)
  -- share_at: max(0, units + 0) in and out of the skew span; 0 before the fence ends.
  local function share(t)
    if t < fence_end then return 0 end
    return units
  end
  local function capacity(s) return (C * s) / SHARE_UNITS + b end
  local function rate(s) return (L * s) / (P * SHARE_UNITS) end

  -- refill, over the same segments (the share is constant on each; their edges split the float sums).
  local function refill(tokens, t, latest)
    if now <= t then return math.min(tokens, capacity(share(now))) end
    local settles = math.max(fence_end, (latest + 2) * P + p.skew)
    local segment = 0
    while segment < MAX_REFILL_SEGMENTS and t < now and t < settles do
      local stop = math.min(now, next_share_change(p, fence, t))
      local s = share(t)
      tokens = math.min(capacity(s), tokens + (stop - t) * rate(s))
      t = stop
      segment = segment + 1
    end
    local s = share(now)
    if t < now and t >= settles then tokens = math.min(capacity(s), tokens + (now - t) * rate(s)) end
    return math.min(tokens, capacity(s))
  end

  local tokens
  if stored ~= nil then
    tokens = refill(stored, tonumber(held[3]) or 0, math.max(ids[0], ids[1], ids[2]))
  elseif fence > 0 and fence <= now then
    -- new_bucket after a data loss: empty at the fence, refilled since (its slots are empty: latest -1).
    tokens = refill(refill(0, fence, -1), now, -1)
  else
    tokens = capacity(share(now))
  end

  local sigma = share(now)
  local cap = capacity(sigma)
  -- bucketQuotaRemaining and bucketFalseDenial over this region's counts alone.
  local carried = math.max(0, math.min(C, L) - before)
  local elapsed_refill = (L * (now - epoch * P)) / P
  local function quota(remaining, admitted)
    local whole = math.max(0, math.floor(remaining))
    if now < fence_end then return whole end
    local held_global = math.min(C, carried + elapsed_refill)
    return math.max(whole, math.min(C, math.max(0, math.floor(held_global - (used + admitted)))))
  end
  local allowed = tokens >= cost
  local verdict_quota, false_denial
  if allowed then
    verdict_quota = quota(tokens - cost, cost)
    false_denial = false
  else
    verdict_quota = quota(tokens, 0)
    false_denial = now >= fence_end and used + cost <= carried + elapsed_refill
  end

  -- The epoch's slot after a write: this region's cells (a slot holding an older epoch starts from zeros).
  local function store(count, at, after)
    local sets = { 'tokens', fmt(after), 'last_refill', fmt(now), 'sig', fmt(sigma) }
    if held[1] == false then
      sets[#sets + 1] = 'z'
      sets[#sets + 1] = '1'
    end
    local dels = {}
    if ids[k] ~= epoch then
      sets[#sets + 1] = 'w' .. kl
      sets[#sets + 1] = fmt(epoch)
    end
    for _, cell in ipairs({ { c_field, count, slot_c }, { t_field, at, slot_t } }) do
      if cell[2] == 0 then
        if cell[3] ~= 0 then dels[#dels + 1] = cell[1] end
      elseif cell[2] ~= cell[3] then
        sets[#sets + 1] = cell[1]
        sets[#sets + 1] = fmt(cell[2])
      end
    end
    if #dels > 0 then redis.call('HDEL', rule.key, unpack(dels)) end
    redis.call('HSET', rule.key, unpack(sets))
    redis.call('PEXPIRE', rule.key, federated_bucket_ttl(P, p.skew, C, p.budget, L))
  end
  local function commit()
    store(used + cost, math.max(last_at, now), tokens - cost)
  end
  -- A false denial of a stored bucket refreshes this region's t in the epoch (token_bucket.lua's touch).
  local touch = nil
  if stored ~= nil then
    touch = function() store(used, math.max(last_at, now), tokens) end
  end
  local gossip = admission_gossip(false, used, last_at, tokens - cost, cap, cost, silent_share(p), p.horizon, now)
  return tokens, cap, rate(sigma), commit, gossip, false_denial, touch, verdict_quota
end
