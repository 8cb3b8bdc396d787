--[[
  Forget keys a peer has durably received, unless they changed again since they were read.
  KEYS[1]  the peer's pending ZSET for one shard
  ARGV     key, version, key, version, ...
  Returns the number of keys removed.
]]
local removed = 0
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score ~= false and tonumber(score) <= tonumber(ARGV[i + 1]) then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return removed
