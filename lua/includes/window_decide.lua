--[[
  The window algorithms' decision (fixedWindow, slidingWindow): protocol.ts windowBase, windowAllowance,
  windowForfeited, windowQuotaRemaining and decideWindow, line for line, over the slots of load_state. commit_window applies an
  admission in place.
]]
-- floor((L+B)·ω_d) plus d's part of the remainder, rotating with the window id: Σ_d base_d = L + B.
local function window_base(p, d, id)
  if p.unbounded then return math.huge end
  local total = p.limit + p.budget
  local floors = 0
  for o = 0, p.n - 1 do floors = floors + portion(total, p.units[o]) end
  local remainder = total - floors
  local turn = (d - id) % p.n
  local extra = math.floor(remainder / p.n)
  if turn < remainder % p.n then extra = extra + 1 end
  return portion(total, p.units[d]) + extra
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
