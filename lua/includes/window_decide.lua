--[[
  The window algorithms' decision (fixedWindow, slidingWindow): protocol.ts windowBase, windowAllowance,
  windowForfeited, windowQuotaRemaining and decideWindow, line for line, over the slots of load_state. commit_window applies an
  admission in place.
]]
-- Every region's base in window `id` (protocol.ts windowBase: floor(T·u_d/Σu), the remainder by D'Hondt's
-- priority, ties rotating with the window id; house-monotone, Σ_d base_d = L + B), computed once per parameter
-- table and window: a decision and its rebalance read several regions' bases.
local function window_bases(p, id)
  local cached = p.bases
  if cached ~= nil and cached.id == id then return cached end
  local total = p.limit + p.budget
  local n = p.n
  local units = 0
  for o = 0, n - 1 do units = units + p.units[o] end
  -- floor(T·u_o/Σu): a lower bound of every region's D'Hondt part, fewer than n units left to place.
  local held = { id = id }
  local remainder = total
  for o = 0, n - 1 do
    held[o] = math.floor((total * p.units[o]) / units)
    remainder = remainder - held[o]
  end
  -- The remainder one unit at a time to the largest u_o/(s_o + 1), ties to the earlier turn (protocol.ts windowBase).
  while remainder > 0 do
    local best = 0
    for o = 1, n - 1 do
      local ahead = p.units[o] * (held[best] + 1) - p.units[best] * (held[o] + 1)
      if ahead > 0 or (ahead == 0 and (o - id) % n < (best - id) % n) then best = o end
    end
    held[best] = held[best] + 1
    remainder = remainder - 1
  end
  p.bases = held
  return held
end

-- d's part of L + B in window `id`.
local function window_base(p, d, id)
  if p.unbounded then return math.huge end
  return window_bases(p, id)[d]
end

-- `id` is the window the slot stands for (a zero slot carries id -1).
local function window_allowance(p, slot, d, id)
  return window_base(p, d, id) + net_transfer(slot, p.n, d)
end

-- Window w is forfeited when it started at or before the recovery fence.
local function window_forfeited(p, fence, id)
  return fence > 0 and id <= math.floor(fence / p.period)
end

-- a[r][d] := max(a[r][d], c[d])
local function acknowledge(slot, n, r)
  for d = 0, n - 1 do slot.a[r][d] = math.max(slot.a[r][d], slot.c[d]) end
end

-- The federation's remaining quota after a decision as this view has it (protocol.ts windowQuotaRemaining):
-- 0 in a forfeited window, else max(remaining, room - admitted, 0).
local function window_quota_remaining(room, remaining, admitted, forfeited)
  if forfeited then return 0 end
  return math.max(remaining, room - admitted, 0)
end

-- The decision without its effect: { allowed, remaining, quota, id, false_denial }. commit_window applies an
-- admission.
local function decide_window(p, slots, fence, now, cost, sliding)
  local n, r = p.n, p.self
  local id = math.floor(now / p.period)
  local cells = cells_of(slots, id, n, true)
  local global = sum_cells(cells.c, n)
  local allowance = math.huge
  if not p.unbounded then allowance = window_allowance(p, cells, r, id) - cells.c[r] end
  local room = p.limit - global
  if sliding then
    local previous = sum_cells(cells_of(slots, id - 1, n, true).c, n)
    local elapsed = now - id * p.period
    local weighted = (previous * (p.period - elapsed)) / p.period
    room = math.min(room, math.floor(p.limit - weighted - global))
  end
  local remaining = math.max(0, math.min(allowance, room))
  if window_forfeited(p, fence, id) then
    return { allowed = false, remaining = 0, quota = window_quota_remaining(room, 0, 0, true), id = id, false_denial = false }
  end
  -- A false denial: this region's allowance denies while its view of the window has global room.
  if cost > remaining then
    return { allowed = false, remaining = remaining, quota = window_quota_remaining(room, remaining, 0, false), id = id,
      false_denial = cost <= room }
  end
  return { allowed = true, remaining = remaining - cost, quota = window_quota_remaining(room, remaining - cost, cost, false),
    id = id, false_denial = false }
end

local function commit_window(p, slots, now, id, cost)
  local n, r = p.n, p.self
  local k = slot_index(id)
  if slots[k].id ~= id then slots[k] = empty_slot(n, id, true) end
  local slot = slots[k]
  slot.c[r] = slot.c[r] + cost
  slot.t[r] = math.max(slot.t[r], now)
  acknowledge(slot, n, r)
end
