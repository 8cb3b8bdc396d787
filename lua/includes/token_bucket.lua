--[[
  Token bucket, the seed's model: a Hash with `tokens` and `last_refill` (ms), refill capped at capacity,
  a cost of n tokens, a denial writes nothing.
  Federated: the region holds a share sigma of capacity and rate (sig = share in force at the last refill),
  so the capacities of all regions add up to capacity + budget and their rates to the rule's rate.
  rule = { key, limit (tokens per period), period, burst (capacity), budget, cost }
]]
local function bucket_share(rule, fed, now)
  if fed.n == 1 then return SHARE_UNITS, nil end
  local epoch = math.floor(now / rule.period)
  local cells = read_cells(rule.key, epoch, fed.n)
  local prev = nil
  if now - epoch * rule.period < fed.skew then prev = read_cells(rule.key, epoch - 1, fed.n) end
  return share_units(cells, prev, fed, fed.self, now, rule.period), cells
end

local function bucket_shape(rule, fed, units)
  local fraction = units / SHARE_UNITS
  local extra = 0
  if fed.n > 1 and rule.budget > 0 then extra = math.floor(rule.budget * fed.weights[fed.self]) end
  return rule.burst * fraction + extra, (rule.limit / rule.period) * fraction
end

-- Tokens available now, after the refill (never credits more than the smaller of the old and new share).
local function refilled_tokens(rule, fed, now, units)
  local state = redis.call('HMGET', rule.key, 'tokens', 'last_refill', 'sig')
  local capacity, rate = bucket_shape(rule, fed, units)
  local tokens = tonumber(state[1])
  if tokens == nil then
    tokens = capacity
    if fed.n > 1 and fed.fence > 0 and rate > 0 and now - fed.fence < capacity / rate then
      tokens = math.min(capacity, (now - fed.fence) * rate)
    end
    return tokens, capacity, rate
  end
  local last = tonumber(state[2]) or now
  local sig = tonumber(state[3]) or units
  local _, slower = bucket_shape(rule, fed, math.min(sig, units))
  tokens = math.min(capacity, tokens + math.max(0, now - last) * slower)
  return tokens, capacity, rate
end

local function store_bucket(rule, fed, now, units, tokens, capacity, rate)
  redis.call('HSET', rule.key, 'tokens', tokens, 'last_refill', now)
  if fed.n > 1 then redis.call('HSET', rule.key, 'sig', units) end
  local full_in = 0
  if rate > 0 then full_in = math.ceil((capacity - tokens) / rate) end
  local ttl = full_in + 1000
  if fed.n > 1 then ttl = math.max(ttl, 2 * rule.period + fed.skew + 1000) end
  redis.call('PEXPIRE', rule.key, ttl)
end

local function token_bucket(rule, fed, now)
  local units, cells = bucket_share(rule, fed, now)
  local tokens, capacity, rate = refilled_tokens(rule, fed, now, units)
  local cost = rule.cost
  local allowed = tokens >= cost
  local after = allowed and (tokens - cost) or tokens
  local full_rate = rule.limit / rule.period
  local reset_at = now
  if rate > 0 then reset_at = now + math.ceil((capacity - after) / rate) end
  local retry_after = 0
  if not allowed then
    if rate > 0 and cost <= capacity then
      retry_after = math.max(1, math.ceil((cost - tokens) / rate))
    else
      -- This region holds no share right now (or the cost exceeds capacity): try again next epoch.
      retry_after = math.max(1, (math.floor(now / rule.period) + 1) * rule.period - now)
      if full_rate > 0 then reset_at = now + retry_after end
    end
  end
  local decision = {
    allowed = allowed,
    remaining = math.max(0, math.floor(after)),
    reset_at = reset_at,
    retry_after = retry_after,
    federated = fed.n > 1,
  }
  decision.commit = function()
    store_bucket(rule, fed, now, units, after, capacity, rate)
    if fed.n > 1 then
      local epoch = math.floor(now / rule.period)
      claim_slot(rule.key, epoch, fed.n)
      redis.call('HINCRBY', rule.key, 'c' .. (epoch % 3) .. '.' .. fed.self, cost)
    end
  end
  return decision
end
