--[[
  Concurrency (in-flight) limiter: each admitted request holds `cost` slots as leases in a ZSET scored by
  expiry, so a gateway that crashes without releasing cannot leak them past lease_ttl.
  rule = { key, limit, lease_ttl, lease_id, cost }
]]
local function concurrency(rule, fed, now)
  local L, cost = rule.limit, rule.cost
  redis.call('ZREMRANGEBYSCORE', rule.key, '-inf', now)
  local count = redis.call('ZCARD', rule.key)
  local allowed = count + cost <= L
  local first = redis.call('ZRANGE', rule.key, 0, 0, 'WITHSCORES')
  local reset_at = now
  if first[2] ~= nil then reset_at = tonumber(first[2]) end
  local decision = {
    allowed = allowed,
    remaining = math.max(0, L - count - (allowed and cost or 0)),
    reset_at = reset_at,
    retry_after = allowed and 0 or math.max(1, reset_at - now),
    federated = false,
  }
  decision.commit = function()
    local members = {}
    for i = 1, cost do
      members[#members + 1] = now + rule.lease_ttl
      members[#members + 1] = rule.lease_id .. '#' .. i
    end
    redis.call('ZADD', rule.key, unpack(members))
    redis.call('PEXPIRE', rule.key, rule.lease_ttl + 1000)
  end
  return decision
end
