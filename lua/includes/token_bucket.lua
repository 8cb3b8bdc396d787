--[[
  Token bucket for decide.lua (protocol.ts decideBucket): a hash with `tokens` and `last_refill` (ms), a cost
  of n tokens, a denial writes nothing. Federated, the region holds a share σ of capacity and rate that
  follows its epoch slots (bucket_share.lua); a single region holds all of it and stores nothing else.
  rule = { key, limit (tokens per period), period, burst (capacity), budget, cost }
]]

--[[
  A single region holds σ = S for ever (no slots, no fence): decideBucket reduces to the seed's bucket, computed
  without the share machinery but with the same float operations (cap = (C·S)/S + 0 = C exactly, and one
  refill segment at (L·S)/(P·S)). Returns tokens, capacity, rate and the store for an admission.
]]
local function single_region_bucket(rule, now)
  local C, cost = rule.burst, rule.cost
  local rate = (rule.limit * SHARE_UNITS) / (rule.period * SHARE_UNITS)
  local held = redis.call('HMGET', rule.key, 'tokens', 'last_refill')
  local tokens, last = tonumber(held[1]), tonumber(held[2])
  if tokens == nil then
    tokens = C
  elseif now <= last then
    tokens = math.min(tokens, C)
  else
    tokens = math.min(C, tokens + (now - last) * rate)
  end
  local function store()
    local after = tokens - cost
    redis.call('HSET', rule.key, 'tokens', fmt(after), 'last_refill', fmt(now))
    local full_in = 0
    if rate > 0 then full_in = math.ceil((C - after) / rate) end
    redis.call('PEXPIRE', rule.key, full_in + 1000)
  end
  return tokens, C, rate, store
end

local function federated_bucket(rule, ctx, now)
  local p = rule_params(ctx, rule.limit, rule.period, rule.burst, rule.budget)
  local state, bucket = load_bucket(p, rule.key, true, now)
  local verdict = decide_bucket(p, bucket, ctx.fence, now, rule.cost)
  local share = share_at(p, verdict.bucket.slots, ctx.fence, now)
  local function store()
    store_bucket(p, state, commit_bucket(p, verdict, ctx.fence, now, rule.cost))
  end
  -- This region's first admission in the epoch: the key goes on the fast lane.
  local first = epoch_cells(p, verdict.bucket.slots, math.floor(now / rule.period)).c[p.self] == 0
  return verdict.tokens, bucket_capacity(p, share), bucket_rate(p, share), store, first, verdict.false_denial == true
end

local function token_bucket(rule, ctx, now)
  local cost, period = rule.cost, rule.period
  local tokens, capacity, rate, store, first, false_denial
  if ctx.n == 1 then
    tokens, capacity, rate, store = single_region_bucket(rule, now)
  else
    tokens, capacity, rate, store, first, false_denial = federated_bucket(rule, ctx, now)
  end
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
      -- This region holds no share right now (or the cost exceeds capacity): try again next epoch.
      retry_after = math.max(1, (math.floor(now / period) + 1) * period - now)
      reset_at = now + retry_after
    end
  end
  return {
    allowed = allowed,
    remaining = math.max(0, math.floor(after)),
    reset_at = reset_at,
    retry_after = retry_after,
    federated = ctx.n > 1,
    first = first == true,
    false_denial = false_denial == true,
    commit = store,
  }
end
