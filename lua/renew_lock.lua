--[[
  Extend a lock this owner still holds (compare-and-act: never extend a lock another owner took after ours
  expired).
  KEYS[1]  the lock key     ARGV[1] owner id     ARGV[2] ttl ms
  Returns 1 when extended, 0 when the lock is not ours.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
