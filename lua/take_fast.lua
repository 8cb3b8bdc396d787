--[[
  The fast lane's take (src/federation/gossip/fast-lane.ts): pop up to ARGV[1] keys from one shard's fast-lane set
  and read each one's current state in the same call, as take_pending.lua reads a pending set's keys (the keys
  of a shard share its hash tag, so they live where the set does).
  KEYS[1]  the shard's fast-lane set, qf:{s<n>}:f
  ARGV[1]  most keys to pop
  Returns { { key, { field, value, ... } }, ... }; a key that expired comes back with no fields, and so does a key
  that is a string now (it expired and came back silent: silent_string.lua; it has nothing to send).
]]
--- @include "includes/sent_state"

local popped = redis.call('SPOP', KEYS[1], tonumber(ARGV[1]))
local out = {}
for i = 1, #popped do
  out[i] = { popped[i], sent_state(popped[i]) }
end
return out
