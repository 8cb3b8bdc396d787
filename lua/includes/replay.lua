--[[
  The replay record of gossip jobs (src/federation/gossip/replay.ts): a ZSET per sender of the sequence numbers
  applied, scored by themselves, bounded to the newest `retained`. replay_check.lua, replay_record.lua and the
  job function (includes/apply_job.lua) call these.
]]

-- Whether `seq` was applied already: it is in the record, or the record is full and `seq` is at or below the
-- oldest number it keeps (it cannot be told apart from one forgotten).
local function replay_seen(record, seq, retained)
  if redis.call('ZSCORE', record, seq) ~= false then return true end
  if redis.call('ZCARD', record) < tonumber(retained) then return false end
  local oldest = redis.call('ZRANGE', record, 0, 0, 'WITHSCORES')
  return oldest[2] ~= nil and tonumber(seq) <= tonumber(oldest[2])
end

-- Records `seq` and keeps the newest `retained` numbers; returns how many were dropped from the old end.
local function replay_keep(record, seq, retained)
  redis.call('ZADD', record, seq, seq)
  return redis.call('ZREMRANGEBYRANK', record, 0, -tonumber(retained) - 1)
end
