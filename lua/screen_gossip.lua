--[[
  Refuse oversized gossip jobs before the worker reads them: looks at the next jobs of the BullMQ wait list
  (the worker takes them from the tail, RPOPLPUSH) and measures each job's `data` field with HSTRLEN, without
  reading it. A job above the limit is taken off the wait list, its data dropped (the memory is freed in Redis
  too) and it is put in the failed set with a reason, as BullMQ would record a failed job.

  It also tells whether BullMQ's take (moveToActive) could find a job at all: a job waits (after the screen), is
  delayed (a retry's backoff: the take promotes it when due) or is prioritized. When none is, the worker skips
  the take and blocks on the queue's marker at once (src/federation/gossip/worker.ts), and the screen removes the
  base marker (member "0"), which then only says what is false: BullMQ's take adds it again after every job it
  takes, so a worker that blocked after its job would wake at once to find nothing. A job added later sets it
  again (and the check and the removal are one script: no job is left without its marker).

  KEYS[1]  the queue's wait list ({qf}:gossip:wait)
  KEYS[2]  the queue's failed set ({qf}:gossip:failed)
  KEYS[3]  the queue's delayed set ({qf}:gossip:delayed)
  KEYS[4]  the queue's prioritized set ({qf}:gossip:prioritized)
  KEYS[5]  the queue's marker ({qf}:gossip:marker)
  ARGV[1]  job key prefix ({qf}:gossip:)    ARGV[2] most bytes of `data`
  ARGV[3]  how many jobs at the tail to look at    ARGV[4] now (ms)

  Returns { takeable, id, size, id, size, ... }: takeable 1 when a take may find a job (0: none waits, none is
  delayed or prioritized), then the jobs refused.
]]
local ids = redis.call('LRANGE', KEYS[1], -tonumber(ARGV[3]), -1)
local limit = tonumber(ARGV[2])
local refused = { 0 }
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  local size = redis.call('HSTRLEN', key, 'data')
  if size > limit then
    redis.call('LREM', KEYS[1], -1, id)
    redis.call('HSET', key, 'data', '{}', 'failedReason', 'rejected: oversized', 'finishedOn', ARGV[4])
    redis.call('ZADD', KEYS[2], tonumber(ARGV[4]), id)
    refused[#refused + 1] = id
    refused[#refused + 1] = size
  end
end
if redis.call('LLEN', KEYS[1]) > 0 or redis.call('ZCARD', KEYS[3]) > 0 or redis.call('ZCARD', KEYS[4]) > 0 then
  refused[1] = 1
else
  redis.call('ZREM', KEYS[5], '0')
end
return refused
