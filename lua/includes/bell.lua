--[[
  A shard's bell qf:{s<n>}:b: a list the gossip publisher blocks on (BLMPOP) instead of polling the shard's sets.
  A script that added a key to the shard's fast-lane set, a peer's pending set or the watch set rings the bell
  once, at its end, naming the lanes it gave work to: the list's one element is 'L' followed by a bit mask, bit 0
  the fast lane, bit 1 the watch sweep, bit 2 + d the sync round to peer d (src/federation/gossip/bells.ts reads
  it, and marks the shard dirty for those lanes only: a lane with nothing new in the shard is not sent to look).
  A bell already rung keeps its one element and gains the new lanes (LSET, only when the mask grows): a busy
  shard costs one LINDEX per call. Any other element ('1': the resync's ring, or an older version's) names every
  lane, and a ring leaves it as it is. The publisher pops the bell before it reads the sets, so a key added after
  that rings again: no key waits for more than the publisher's next wake.
]]

local BELL_FAST, BELL_WATCH = 1, 2
-- Peers above this index are not given a bit of their own: a ring that names one names every lane.
local BELL_MAX_PEER = 28

--[[
  The lanes of the pending sets in `sets` (pending_peer of includes/federation.lua, included before this file): a
  mask, or -1 (every lane) when one of them has no bit of its own.
]]
local function bell_lanes_of(sets)
  local lanes = 0
  for _, set in ipairs(sets) do
    local d = pending_peer(set)
    if d == nil or d > BELL_MAX_PEER then return -1 end
    lanes = bit.bor(lanes, bit.lshift(1, 2 + d))
  end
  return lanes
end

-- Rings `bell` for `lanes` (a mask of the lanes above, or -1: every lane).
local function ring_bell(bell, lanes)
  local rung = redis.call('LINDEX', bell, 0)
  if lanes < 0 then
    if rung == false then
      redis.call('RPUSH', bell, '1')
    elseif rung ~= '1' then
      redis.call('LSET', bell, 0, '1')
    end
    return
  end
  if rung == false then
    redis.call('RPUSH', bell, 'L' .. lanes)
    return
  end
  local had = tonumber(string.match(rung, '^L(%d+)$'))
  if had == nil then return end
  local merged = bit.bor(had, lanes)
  if merged ~= had then redis.call('LSET', bell, 0, 'L' .. merged) end
end
