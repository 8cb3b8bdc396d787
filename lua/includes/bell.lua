--[[
  A shard's bell qf:{s<n>}:b: a list the gossip publisher blocks on (BLMPOP) instead of polling the shard's sets.
  A script that added a key to the shard's fast-lane set, a peer's pending set or the watch set rings the bell
  once, at its end. A bell already rung is left as it is: a busy shard costs one LLEN per call, and the list
  never holds more than one element. The publisher pops the bell before it reads the sets, so a key added after
  that rings again: no key waits for more than the publisher's next wake.
]]

local function ring_bell(bell)
  if redis.call('LLEN', bell) == 0 then redis.call('RPUSH', bell, '1') end
end
