--[[
  apply_job(KEYS, ARGV): a gossip job, or one part of it, in one call (src/federation/gossip/apply.ts): the replay check
  (replay_check.lua), then each entry's merge (apply_gossip.lua) in order, then the replay record (replay_record.lua)
  and the mark of when the sender was last heard: what those calls do one after the other, in one round trip. A long
  job goes in parts (gossip-calls.ts runApplyJob), so no call holds Redis for long: the first part checks, the last
  records. Needs `apply_gossip` (includes/apply_gossip.lua) and `renew_memos` (includes/federation.lua).

  KEYS[1]  the sender's replay record qf:seen:<region>   KEYS[2] the region's meta hash (the heard mark)
  then per entry its apply_gossip.lua KEYS
  ARGV[1]  the job's sequence number   ARGV[2] how many numbers the record keeps (RETAINED)
  ARGV[3]  the heard field (heard:<region>)   ARGV[4] the heard time, ms
  ARGV[5]  1: check the record first (the job's first part)   ARGV[6] 1: record the job after (its last part)
  ARGV[7]  1: leave the shards' bells as they are (apply_gossip.lua's bell_quiet: the caller's process runs the
           region's publisher and marks the lanes each reply names itself)
  ARGV[8]  the entry count, then per entry: its key count, its argument count and its apply_gossip.lua ARGV
  (src/store/gossip-calls.ts applyJobCall lays this out)

  Returns { 1 } for a replay (nothing written); else { 0, reply 1, reply 2, ... }, each entry's apply_gossip.lua
  reply in entry order (its fourth value the lanes its merge gave the publisher work in, rung or not). An entry
  that raises an error ends the call with that error before the record is written, so the job is retried (a merge
  is a max: the entries applied before it change nothing twice).
]]
--- @include "includes/replay"

local function apply_job(KEYS, ARGV)
  if ARGV[5] == '1' and replay_seen(KEYS[1], ARGV[1], ARGV[2]) then return { 1 } end
  local reply = { 0 }
  local k, a = 2, 9
  bell_quiet = ARGV[7] == '1'
  for i = 1, tonumber(ARGV[8]) do
    local nk, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
    a = a + 2
    local keys, args = {}, {}
    for j = 1, nk do keys[j] = KEYS[k + j] end
    for j = 1, na do args[j] = ARGV[a + j - 1] end
    k, a = k + nk, a + na
    -- Each merge starts from fresh memos, as a call of its own would.
    renew_memos()
    local ok, result = pcall(apply_gossip, keys, args)
    if not ok then
      bell_quiet = false
      if type(result) == 'table' and result.err then return redis.error_reply(result.err) end
      return redis.error_reply(tostring(result))
    end
    reply[i + 1] = result
  end
  bell_quiet = false
  if ARGV[6] == '1' then
    replay_keep(KEYS[1], ARGV[1], ARGV[2])
    redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
  end
  return reply
end
