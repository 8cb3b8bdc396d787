--[[
  Read the oldest keys waiting for delivery to one peer, with their current state (newer state supersedes
  older unsent state: what is read here is always the latest).
  KEYS[1]  the peer's pending ZSET for one shard, qf:{s<n>}:p:<peer index>
  ARGV[1]  most keys to return
  Returns { pending, { { key, version, { field, value, ... } }, ... } }: how many keys the set held (the sync round
  counts a shard in the take itself, not in a round trip before it), then the keys read; a key that expired comes
  back with no fields, and so does a key that is a string now (it expired and came back silent: silent_string.lua;
  it has nothing to send).
]]
--- @include "includes/sent_state"

local pending = redis.call('ZCARD', KEYS[1])
local members = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
local out = {}
for i = 1, #members, 2 do
  out[#out + 1] = { members[i], members[i + 1], sent_state(members[i]) }
end
return { pending, out }
