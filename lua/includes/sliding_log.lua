--[[
  Sliding-window log: one ZSET member per admitted unit, scored by its time. Exact, O(requests) memory.
  Regional only (federating it would mean gossiping every request).
]]
local function sliding_log(rule, fed, now)
  local L, P, cost = rule.limit, rule.period, rule.cost
  redis.call('ZREMRANGEBYSCORE', rule.key, '-inf', now - P)
  local count = redis.call('ZCARD', rule.key)
  local allowed = count + cost <= L
  local reset_at = now + P
  local oldest = redis.call('ZRANGE', rule.key, 0, 0, 'WITHSCORES')
  if oldest[2] ~= nil then reset_at = tonumber(oldest[2]) + P end
  local retry_after = 0
  if not allowed then
    if cost > L then
      retry_after = P
    else
      -- The request fits once the (count + cost - L)th oldest entry has slid out.
      local nth = redis.call('ZRANGE', rule.key, count + cost - L - 1, count + cost - L - 1, 'WITHSCORES')
      retry_after = math.max(1, tonumber(nth[2]) + P - now)
    end
  end
  local decision = {
    allowed = allowed,
    remaining = math.max(0, L - count - (allowed and cost or 0)),
    reset_at = reset_at,
    retry_after = retry_after,
    federated = false,
  }
  decision.commit = function()
    -- Members are the request's lease id, so a refund can remove exactly what this request added.
    local members = {}
    for i = 1, cost do
      members[#members + 1] = now
      members[#members + 1] = rule.lease_id .. '#' .. i
    end
    redis.call('ZADD', rule.key, unpack(members))
    redis.call('PEXPIRE', rule.key, P + 1000)
  end
  return decision
end
