--[[
  The window algorithms' gossip side: protocol.ts rebalanceWindow, mergeWindow, windowHasHungryPeer and
  sweepWindow, line for line. They mutate `slots` in place and say whether they changed anything.
]]
-- Demand-following transfer in window `id` (id ≤ current, not forfeited). Returns true when it gave.
-- An active giver gives a fraction of its surplus beyond what it used to hungry peers; a free donor (idle in w
-- and w-1) gives all but one request (none in the window's last tenth) to hungry and active peers.
local function rebalance_window(p, slots, id, now)
  if p.unbounded or p.n < 2 then return false end
  local n, r, policy = p.n, p.self, p.policy
  local slot = slots[slot_index(id)]
  if slot.id ~= id then return false end
  local own = window_allowance(p, slot, r, id)
  local previous = cells_of(slots, id - 1, n, true)
  local free = free_donor(p, slot, previous, r, now)
  if not free and hungry(p, slot, previous, r, own, now) then return false end
  local peers = {}
  for d = 0, n - 1 do
    if d ~= r and wanting(p, slot, previous, d, now, free, hungry(p, slot, previous, d, window_allowance(p, slot, d, id), now)) then
      peers[#peers + 1] = d
    end
  end
  local last_tenth = (id + 1) * p.period - now <= math.min(policy.idle, p.period / 10)
  if #peers == 0 then
    -- A free donor with nobody to give to hands back what it holds of its peers' allowance
    -- (protocol.ts returnWindowAllowance): per peer, held_from, as far as its unused allowance less what it keeps covers.
    if not free then return false end
    local spare = own - slot.c[r]
    if not last_tenth then spare = spare - 1 end
    local amounts = return_amounts(slot, n, r, spare, policy.min_surplus)
    if amounts == nil then return false end
    for d = 0, n - 1 do
      if amounts[d] > 0 then slot.x[r][d] = slot.x[r][d] + amounts[d] end
    end
    return true
  end
  local reserve
  if free then
    reserve = 1
    if last_tenth then reserve = 0 end
  else
    reserve = math.max(math.ceil(policy.reserve * window_base(p, r, id)), slot.c[r])
  end
  local surplus = own - slot.c[r] - reserve
  if surplus < policy.min_surplus then return false end
  -- At least one each while the surplus covers it (protocol.ts rebalanceWindow).
  local fraction = policy.give
  if free then fraction = 1 end
  local give = math.floor((surplus * fraction) / #peers)
  if surplus >= #peers then give = math.max(give, 1) end
  if give < 1 then return false end
  for _, d in ipairs(peers) do slot.x[r][d] = slot.x[r][d] + give end
  return true
end

-- Applies a peer's slots (ids outside [cur−1, cur+1] ignored, never over a newer window), then rebalances.
local function merge_window(p, slots, fence, now, incoming)
  local n, r = p.n, p.self
  local current = math.floor(now / p.period)
  local changed_ids = {}
  for _, slot in ipairs(incoming) do
    if slot.id >= 0 and slot.id >= current - 1 and slot.id <= current + 1 then
      local k = slot_index(slot.id)
      local held = slots[k]
      if held.id <= slot.id then
        local base = held
        if held.id ~= slot.id then base = empty_slot(n, slot.id, true) end
        local joined = join_slots(base, slot, n)
        acknowledge(joined, n, r)
        if not same_slot(joined, held, n) then
          slots[k] = joined
          changed_ids[#changed_ids + 1] = slot.id
        end
      end
    end
  end
  table.sort(changed_ids)
  for _, id in ipairs(changed_ids) do
    if id <= current and not window_forfeited(p, fence, id) then rebalance_window(p, slots, id, now) end
  end
  return #changed_ids > 0
end

-- Held allowance of a peer's (for the return), or a hungry peer this region could still give to: unused
-- allowance at least max(min_surplus, the hungry peers' count) (protocol.ts windowHasHungryPeer).
local function window_has_hungry_peer(p, slots, now)
  if p.unbounded or p.n < 2 then return false end
  local id = math.floor(now / p.period)
  local slot = cells_of(slots, id, p.n, true)
  local previous = cells_of(slots, id - 1, p.n, true)
  local hungry_peers = 0
  for d = 0, p.n - 1 do
    if d ~= p.self then
      if held_from(slot, p.self, d) > 0 then return true end
      if hungry(p, slot, previous, d, window_allowance(p, slot, d, id), now) then hungry_peers = hungry_peers + 1 end
    end
  end
  return hungry_peers > 0
    and window_allowance(p, slot, p.self, id) - slot.c[p.self] >= math.max(p.policy.min_surplus, hungry_peers)
end

-- Rebalances the current window without new gossip (the sync loop's sweep).
local function sweep_window(p, slots, fence, now)
  local id = math.floor(now / p.period)
  if window_forfeited(p, fence, id) then return false end
  return rebalance_window(p, slots, id, now)
end
