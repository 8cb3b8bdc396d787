--[[
  What merges and rebalances share (never needed on the request path): joining slots, comparing them, and the
  demand signals of protocol.ts (active, hungry) under the REBALANCE policy read from ARGV.
]]
-- Five ARGV values from `at`: hunger, reserve, give fractions, min surplus, idle ms.
-- The REBALANCE policy at ARGV[at .. at + 4] (the call's ARGV: a Functions library has no global one).
local function parse_policy(ARGV, at)
  return {
    hunger = tonumber(ARGV[at]), reserve = tonumber(ARGV[at + 1]), give = tonumber(ARGV[at + 2]),
    min_surplus = tonumber(ARGV[at + 3]), idle = tonumber(ARGV[at + 4]),
  }
end

--[[
  A gossip call's context (self, n, share units and skew at ARGV 1-4, REBALANCE at ARGV[policy_at ..]) and a rule's
  parameters in it (rule_params of the four texts at ARGV[at ..]: limit, period, capacity, budget), kept by their
  texts: a job's entries and a sweep's keys of one rule share them, and parsing them took about 50,000 instructions
  an entry. A Functions library keeps them between calls (at most 64 of each, then it starts over). Parameters carry
  only what follows from them (bucket_budget's part, window_bases, silent_view), never a key's state.
]]
local gossip_context, gossip_params
do
  local contexts, params_of, kept = {}, {}, 0
  function gossip_context(ARGV, policy_at)
    local id = table.concat(ARGV, ',', 1, 4) .. ';' .. table.concat(ARGV, ',', policy_at, policy_at + 4)
    local ctx = contexts[id]
    if ctx == nil then
      local n = tonumber(ARGV[2])
      ctx = {
        n = n, self = tonumber(ARGV[1]), units = parse_units(ARGV[3], n), skew = tonumber(ARGV[4]),
        policy = parse_policy(ARGV, policy_at),
      }
      if kept >= 64 then contexts, params_of, kept = {}, {}, 0 end
      contexts[id] = ctx
      params_of[ctx] = { kept = 0 }
      kept = kept + 1
    end
    return ctx
  end
  function gossip_params(ctx, ARGV, at)
    local id = table.concat(ARGV, ',', at, at + 3)
    local known = params_of[ctx]
    local p = known[id]
    if p == nil then
      p = rule_params(ctx, tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3]))
      if known.kept >= 64 then
        known = { kept = 0 }
        params_of[ctx] = known
      end
      known[id] = p
      known.kept = known.kept + 1
    end
    return p
  end
end

-- Cellwise max of two slots of the same id.
local function join_slots(left, right, n)
  local joined = empty_slot(n, left.id, left.a ~= nil)
  -- math.max(l, r) as its comparison (r > l and r or l, the same value for every pair, -0 and NaN included): a call
  -- of math.max costs about four times the comparison in Redis's Lua (docs/performance.md).
  local l, r
  for o = 0, n - 1 do
    l, r = left.c[o], right.c[o]
    if r > l then joined.c[o] = r else joined.c[o] = l end
    l, r = left.t[o], right.t[o]
    if r > l then joined.t[o] = r else joined.t[o] = l end
    local lx, rx, jx = left.x[o], right.x[o], joined.x[o]
    for d = 0, n - 1 do
      l, r = lx[d], rx[d]
      if r > l then jx[d] = r else jx[d] = l end
    end
    if joined.a then
      local la, ra, ja = left.a[o], right.a[o], joined.a[o]
      for d = 0, n - 1 do
        l, r = la[d], ra[d]
        if r > l then ja[d] = r else ja[d] = l end
      end
    end
  end
  return joined
end

local function same_slot(left, right, n)
  if left.id ~= right.id then return false end
  for o = 0, n - 1 do
    if left.c[o] ~= right.c[o] or left.t[o] ~= right.t[o] then return false end
    for d = 0, n - 1 do
      if left.x[o][d] ~= right.x[o][d] then return false end
      if left.a and left.a[o][d] ~= right.a[o][d] then return false end
    end
  end
  return true
end

local function active(slot, d, now, policy)
  return slot.t[d] > 0 and now - slot.t[d] <= policy.idle
end

-- The least silence that makes a region quiet (protocol.ts quietSpan): idle/5, at most a twentieth of the period.
local function quiet_span(p)
  return math.min(p.policy.idle / 5, p.period / 20)
end

-- Quiet: no admission in the slot's window for the quiet span and for ten of its own average gaps in it.
local QUIET_GAPS = 10
local function quiet(p, slot, d, now)
  if slot.t[d] <= 0 then return true end
  local gaps = 0
  if slot.c[d] > 0 then gaps = (QUIET_GAPS * (slot.t[d] - slot.id * p.period)) / slot.c[d] end
  return now - slot.t[d] > math.max(quiet_span(p), gaps)
end

-- Stopped (protocol.ts stopped): nothing admitted in the slot's window, or silent since for the quiet span when
-- the traffic began in it, or quiet when it carried over from the previous window (`previous`).
local function stopped(p, slot, previous, d, now)
  if slot.t[d] <= 0 then return true end
  if previous.c[d] > 0 then return quiet(p, slot, d, now) end
  return now - slot.t[d] > quiet_span(p)
end

-- A free donor (protocol.ts freeDonor): stopped in this window (epoch) after admitting in it, or nothing admitted
-- in it yet and quiet in the previous one.
local function free_donor(p, slot, previous, r, now)
  if slot.t[r] <= 0 then return quiet(p, previous, r, now) end
  return stopped(p, slot, previous, r, now)
end

-- Hungry: active and not stopped, and used more than the hunger fraction of its allowance.
-- (Denied while admitting nothing: t without a count, stamped by false denials, is demand too.)
local function hungry(p, slot, previous, d, allowance, now)
  local used = slot.c[d]
  local demanding
  if used > 0 then demanding = used > p.policy.hunger * allowance else demanding = slot.t[d] > 0 end
  return demanding and active(slot, d, now, p.policy) and not stopped(p, slot, previous, d, now)
end

-- Whom a region gives to (protocol.ts wanting): a hungry peer (`hungry_peer`: the algorithm's own hunger test), and,
-- when the region is a free donor, every peer admitting right now (not stopped).
local function wanting(p, slot, previous, d, now, free, hungry_peer)
  return hungry_peer or (free and not stopped(p, slot, previous, d, now))
end

