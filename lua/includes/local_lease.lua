--[[
  Local leases (rules[].lease, docs/leases.md): once a call's rules have all admitted and committed, a rule whose
  call asks for a lease (rule.lease_ask > 0) takes up to that many more units of what it has left, as a second
  decision of the same rule at the same clock in the same script. The gateway process that asked then spends them
  from memory and gives back what it did not spend (refund.lua). To Redis, and to the federation, leased units
  are admissions like any other: the bound is that of two requests decided back to back.

  take_lease(algorithms, read, decision, ctx, now): `read` is the rule as read_rules gives it ({ rule, code,
  shadow }, rule.key set), `decision` its committed admission. Returns the units taken (0 when the rule asked for
  none, was not admitted, or has nothing left) and, when some were taken, their committed decision (decide.lua
  marks it for gossip as it does the first).
]]
local function take_lease(algorithms, read, decision, ctx, now)
  local rule = read.rule
  local ask = rule.lease_ask or 0
  if ask <= 0 or read.shadow or not decision.allowed then return 0, nil end
  local take = math.min(ask, math.floor(decision.remaining))
  if take <= 0 then return 0, nil end
  local cost = rule.cost
  rule.cost = take
  local taken = algorithms[read.code](rule, ctx, now)
  -- remaining is what the same clock would admit: a second decision of at most that many units is admitted. Were
  -- it not, nothing is taken and nothing written. (Committed before the cost is put back: an algorithm's commit
  -- may read the rule's cost then.)
  if taken.allowed then taken.commit() else take = 0 end
  rule.cost = cost
  if take == 0 then return 0, nil end
  return take, taken
end
