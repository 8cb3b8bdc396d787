--[[
  Records an applied gossip job in its sender's replay record and keeps the newest RETAINED numbers
  (src/federation/gossip/replay.ts).
  KEYS[1]  the sender's replay record qf:seen:<region>
  ARGV[1]  the job's sequence number   ARGV[2] how many numbers the record keeps (RETAINED)
  Returns the numbers dropped from the record's old end.
]]
--- @include "includes/replay"

return replay_keep(KEYS[1], ARGV[1], ARGV[2])
