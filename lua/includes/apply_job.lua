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
  ARGV[7]  1: quiet, for a caller whose process runs the region's publisher: leave the shards' bells as they are
           (apply_gossip's `quiet`; the caller marks the lanes each reply names itself), and hand it the keys
           the merges granted in (hand_over below) instead of leaving them in the fast-lane sets
  ARGV[8]  the entry count, then per entry: its key count, its argument count and its apply_gossip.lua ARGV
  (src/store/gossip-calls.ts applyJobCall lays this out)

  Returns { 1 } for a replay (nothing written); else { 0, reply 1, reply 2, ... }, each entry's apply_gossip.lua
  reply in entry order (its fourth value the lanes its merge gave the publisher work in, rung or not; quiet, the
  last reply that granted in a key has the key's HGETALL as a fifth value). An entry that raises an error ends the call
  with that error before the record is written, so the job is retried (a merge is a max: the entries applied
  before it change nothing twice).
]]
--- @include "includes/replay"
--- @include "includes/sent_state"

--[[
  A quiet job's grants, handed to the caller's publisher: each key a merge granted in (reply[3] = 1) leaves its
  shard's fast-lane set and its state, read after every merge of the job, goes back with the last reply that
  granted in it (take_fast.lua's SPOP and HGETALL, for that key, in this call), so the fast lane sends it without a
  take of its own. The replies' lanes lose the fast
  lane's bit (the set holds nothing of theirs now; -1 stays every lane). A key left unsent (the process stops) is
  still in the grantee's pending set: it goes with the next sync round.
]]
local function hand_over(reply, entry_keys)
  local last = {}
  for i, keys in ipairs(entry_keys) do
    if reply[i + 1][3] == 1 then last[keys[1]] = i end
  end
  for i, keys in ipairs(entry_keys) do
    local key = keys[1]
    if last[key] ~= nil then
      local lanes = reply[i + 1][4]
      if lanes > 0 then reply[i + 1][4] = bit.band(lanes, bit.bnot(BELL_FAST)) end
      if last[key] == i then
        redis.call('SREM', keys[4], key)
        reply[i + 1][5] = sent_state(key)
      end
    end
  end
end

local function apply_job(KEYS, ARGV)
  if ARGV[5] == '1' and replay_seen(KEYS[1], ARGV[1], ARGV[2]) then return { 1 } end
  local reply = { 0 }
  local k, a = 2, 9
  local quiet = ARGV[7] == '1'
  local entry_keys = {}
  for i = 1, tonumber(ARGV[8]) do
    local nk, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
    a = a + 2
    local keys, args = {}, {}
    entry_keys[i] = keys
    for j = 1, nk do keys[j] = KEYS[k + j] end
    for j = 1, na do args[j] = ARGV[a + j - 1] end
    k, a = k + nk, a + na
    -- Each merge starts from fresh memos, as a call of its own would.
    renew_memos()
    local ok, result = pcall(apply_gossip, keys, args, quiet)
    if not ok then
      if type(result) == 'table' and result.err then return redis.error_reply(result.err) end
      return redis.error_reply(tostring(result))
    end
    reply[i + 1] = result
  end
  if quiet then hand_over(reply, entry_keys) end
  if ARGV[6] == '1' then
    replay_keep(KEYS[1], ARGV[1], ARGV[2])
    redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
  end
  return reply
end
