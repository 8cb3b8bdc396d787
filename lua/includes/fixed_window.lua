--[[
  Fixed window (and the per-window accounting under the sliding window), federated by demarcation:
  admit while own + cost <= own allowance and the global view + cost <= limit.
  rule = { key, limit, period, budget, cost }
]]
local function window_decision(rule, fed, now, prev_weight_fn)
  local L, P, cost = rule.limit, rule.period, rule.cost
  local id = math.floor(now / P)
  local cells = read_cells(rule.key, id, fed.n)
  local fenced = fed.n > 1 and fed.fence > 0 and id * P < fed.fence
  local own = cells.c[fed.self]
  local allowance = L
  if fed.n > 1 and rule.budget >= 0 then allowance = local_limit(cells, L, rule.budget, fed, fed.self) end
  local seen = global_view(cells, fed.n)
  if prev_weight_fn ~= nil then seen = seen + prev_weight_fn(L, P, id, now) end
  local headroom = math.min(allowance - own, L - seen)
  if fenced then headroom = 0 end
  local allowed = headroom >= cost
  local reset_at = (id + 1) * P
  local decision = {
    allowed = allowed,
    remaining = math.max(0, math.floor(headroom - (allowed and cost or 0))),
    reset_at = reset_at,
    retry_after = allowed and 0 or math.max(1, reset_at - now),
    federated = fed.n > 1,
  }
  decision.commit = function()
    claim_slot(rule.key, id, fed.n)
    redis.call('HINCRBY', rule.key, 'c' .. (id % 3) .. '.' .. fed.self, cost)
    redis.call('PEXPIRE', rule.key, 2 * P + fed.skew + 1000)
  end
  return decision
end

local function fixed_window(rule, fed, now)
  return window_decision(rule, fed, now, nil)
end
