--[[
  The token bucket's single-region state and its verdict, shared by the federated library (token_bucket.lua)
  and the single-region one (single_region.lua), so both decide a region on its own with the same reads, writes and doubles.
  Needs SHARE_UNITS and fmt from the including library.
]]
-- A single region holds σ = S for ever (no slots, no fence): decideBucket reduces to the seed's bucket, computed
-- without the share machinery but with the same float operations (cap = (C·S)/S + 0 = C exactly, and one refill
-- segment at (L·S)/(P·S)).
local function single_region_rate(limit, period)
  return (limit * SHARE_UNITS) / (period * SHARE_UNITS)
end

-- The tokens the bucket at `key` (capacity C) holds at `now`.
local function single_region_tokens(key, C, rate, now)
  local held = redis.call('HMGET', key, 'tokens', 'last_refill')
  local tokens, last = tonumber(held[1]), tonumber(held[2])
  if tokens == nil then
    tokens = C
  elseif now <= last then
    tokens = math.min(tokens, C)
  else
    tokens = math.min(C, tokens + (now - last) * rate)
  end
  return tokens
end

-- fmt for a count, nearly always a whole number: %d writes the same text as %.17g for a whole number of at
-- most 15 digits other than 0 (%.17g tells -0 from 0), at half the cost.
local function fmt_count(value)
  if value % 1 == 0 and value > -1e15 and value < 1e15 and value ~= 0 then return string.format('%d', value) end
  return fmt(value)
end

-- A fmt that keeps the text of the value it was last given (formatting a double is not cheap): the calls of a
-- batch store at one clock, and every new bucket or window of a rule stores the same tokens or counts. 0 is
-- formatted every time: == cannot tell -0 from 0, fmt does.
local function last_fmt()
  local last, text
  return function(value)
    if value ~= last or value == 0 then last, text = value, fmt(value) end
    return text
  end
end

-- The last store's clock and tokens.
local fmt_stored_now, fmt_stored_after = last_fmt(), last_fmt()

-- An admission of `cost` from `tokens`.
local function single_region_store(key, tokens, cost, C, rate, now)
  local after = tokens - cost
  redis.call('HSET', key, 'tokens', fmt_stored_after(after), 'last_refill', fmt_stored_now(now))
  local full_in = 0
  if rate > 0 then full_in = math.ceil((C - after) / rate) end
  redis.call('PEXPIRE', key, full_in + 1000)
end

-- Returns tokens, capacity, rate and the store for an admission.
local function single_region_bucket(rule, now)
  local C, cost = rule.burst, rule.cost
  local rate = single_region_rate(rule.limit, rule.period)
  local tokens = single_region_tokens(rule.key, C, rate, now)
  local function store()
    single_region_store(rule.key, tokens, cost, C, rate, now)
  end
  return tokens, C, rate, store
end

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
