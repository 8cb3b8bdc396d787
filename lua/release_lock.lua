--[[
  Delete a lock this owner still holds (never another owner's).
  KEYS[1]  the lock key     ARGV[1] owner id
  Returns 1 when released, 0 when the lock is not ours.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
