--[[
  Release concurrency slots taken by a finished request.
  KEYS[1]   the concurrency state key
  ARGV[1]   lease id     ARGV[2] slots held (the request's cost)
  Returns the number of slots released.
]]
local members = {}
for i = 1, tonumber(ARGV[2]) do members[i] = ARGV[1] .. '#' .. i end
return redis.call('ZREM', KEYS[1], unpack(members))
