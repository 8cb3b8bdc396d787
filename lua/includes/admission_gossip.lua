--[[
  Which admissions the peers must hear of: src/protocol/admission-gossip.ts (silentShare, peerTalks,
  admissionGossip, bystander) line for line, in the same order of float operations. A key far below its region's share
  stays silent (no pending mark, no fast lane); it turns loud near its share (the watermark), when its pace
  reaches the share within the horizon, or when a peer shows in its slot. Silence only delays messages;
  the bound never depended on when they are sent.
  Returns 'silent', 'round' or 'fast'.
]]
local SILENT_SHARE = 0.9
-- A pace is read only once the region runs 8 admissions ahead of its allowance's pace (protocol PACE_MIN_AHEAD).
local PACE_MIN_AHEAD = 8

-- A loud key reports at each step of max(1, floor(REPORT_STEP·share)) of its count (protocol REPORT_STEP, reportDue).
local REPORT_STEP = 0.02

local function report_due(own_before, cost, share)
  -- (math.max(1, …) as a comparison: the same double.)
  local step = math.floor(REPORT_STEP * share)
  if not (step > 1) then step = 1 end
  return math.floor(own_before / step) ~= math.floor((own_before + cost) / step)
end

-- ω = min(0.9, L/(L+B)); 0 without a budget (plain gossip: every admission is sent).
local function silent_share(p)
  if p.unbounded then return 0 end
  return math.min(SILENT_SHARE, p.limit / (p.limit + p.budget))
end

-- Whether a peer of r shows in the slot: a count of its own, or a transfer to or from r (cells a decision reads).
local function peer_talks(slot, n, r)
  for o = 0, n - 1 do
    if o ~= r and (slot.c[o] ~= 0 or slot.x[o][r] ~= 0 or slot.x[r][o] ~= 0) then return true end
  end
  return false
end

-- ahead: how far r ran ahead of its allowance's pace before the admission (a bucket's tokens short of its
-- capacity, a window's count); room: what r may still admit after the admission; share: its whole allowance
-- there; cost: the admission's; horizon: H in ms.
local function admission_gossip(talks, own_before, ahead, last_at, room, share, cost, silent, horizon, now)
  local first = own_before == 0
  if silent == 0 or talks then
    if first then return 'fast' end
    if silent == 0 or report_due(own_before, cost, share) then return 'round' end
    return 'silent'
  end
  local watermark = silent * share
  local used = share - room
  local slow = first or ahead < PACE_MIN_AHEAD * cost or (now - last_at) * room > horizon
  if used <= watermark and slow then return 'silent' end
  -- Above the watermark before this admission too: the peers heard of the key when it crossed.
  if used - cost > watermark then
    if report_due(own_before, cost, share) then return 'round' end
    return 'silent'
  end
  return 'fast'
end

-- protocol.ts bystander and bucketReportTargets: the peers a token bucket's round report skips in the epoch's
-- cells (`slot`), as a set of region indexes, or nil when it goes to every peer. A bystander admitted nothing there,
-- gave r at least its whole share and got nothing back from r: r's count tells it nothing it acts on.
local function report_skips(slot, units, n, r)
  local skips = nil
  for o = 0, n - 1 do
    if o ~= r and slot.c[o] == 0 and slot.x[r][o] == 0 and slot.x[o][r] >= units[o] then
      if skips == nil then skips = {} end
      skips[o] = true
    end
  end
  return skips
end
