--[[
  An operator's reset of one state key (src/federation/key-reset.ts): the key's state is replaced by a reset
  mark, field r = this Redis's clock (ms) at the reset, and the key leaves its shard's pending sets, fast lane and
  watch set, so nothing more is sent about it. apply_gossip.lua drops an entry about the key whose sender's change
  time is not after r + the max clock skew: gossip that was in flight when the reset ran (a job in the queue, a
  round being sent) cannot bring the old counts back. Decisions read no r: to them the key is new.

  KEYS[1]  the state key        KEYS[2 ..] its shard's pending ZSETs, fast-lane set and watch set
  ARGV[1]  how long the mark lives (ms): longer than any gossip stays in flight
  Returns 1 when the key held state, else 0.
]]
--- @include "includes/clock"
local key = KEYS[1]
local held = redis.call('EXISTS', key)
redis.call('DEL', key)
redis.call('HSET', key, 'r', string.format('%d', now_ms('')))
redis.call('PEXPIRE', key, tonumber(ARGV[1]))
for i = 2, #KEYS do
  if redis.call('TYPE', KEYS[i]).ok == 'zset' then
    redis.call('ZREM', KEYS[i], key)
  else
    redis.call('SREM', KEYS[i], key)
  end
end
return held
