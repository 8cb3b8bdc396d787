--[[
  Whether a gossip job was applied already (src/federation/gossip/replay.ts): its sequence number is in the
  sender's replay record, or the record is full and the number is at or below the oldest one it keeps (it cannot
  be told apart from one forgotten).
  KEYS[1]  the sender's replay record qf:seen:<region> (ZSET of sequence numbers, scored by themselves)
  ARGV[1]  the job's sequence number   ARGV[2] how many numbers the record keeps (RETAINED)
  Returns 1 when the job is a replay, else 0.
]]
--- @include "includes/replay"

if replay_seen(KEYS[1], ARGV[1], ARGV[2]) then return 1 end
return 0
