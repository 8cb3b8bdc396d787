--[[
  The publisher's drain of the bells (src/federation/gossip/bells.ts): after its BLMPOP woke on one rung bell, every
  other bell rung meanwhile is popped in this one call, where one LMPOP round trip per rung bell was taken before.
  Inside, LMPOP still pops one bell at a time (it looks over the keys in C, so an idle bell costs nothing), at most
  once per bell. A single Redis only, as the bells' wait is (the keys span a cluster's slots).
  KEYS  the shards' bells, qf:{s<n>}:b, in shard order (KEYS[1] is shard 0)
  Returns { { bell, { element, ... } }, ... } for each bell that held an element (lua/includes/bell.lua: its lanes).
]]
local args = { #KEYS }
for i = 1, #KEYS do args[i + 1] = KEYS[i] end
args[#args + 1] = 'LEFT'
args[#args + 1] = 'COUNT'
args[#args + 1] = 64
local out = {}
for _ = 1, #KEYS do
  local popped = redis.call('LMPOP', unpack(args))
  if not popped then break end
  out[#out + 1] = popped
end
return out
