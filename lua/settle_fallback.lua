--[[
  Write what the local fallback admitted while Redis was unreachable into Redis, against the window it was
  admitted in, so later decisions of this region and (through the pending ZSETs, i.e. gossip) the peers count
  it. Window algorithms only (fixedWindow, slidingWindow: the same cells). The count is added whatever the
  allowance says: it was already admitted. A window Redis no longer keeps (its slot holds a newer window) is
  skipped; a window after Redis's current one (a gateway clock ahead) is counted in the current window.

  KEYS[1 .. p]     pending ZSETs of the p peers, qf:{s<n>}:p:<peer index> (one shard; none when alone)
  KEYS[p+1]        federated only (n > 1): the shard's bell qf:{s<n>}:b (rung when a key was queued:
                   includes/bell.lua)
  KEYS[p+2 ..]     (n = 1: KEYS[1 ..]) one state key per entry, in ARGV order

  ARGV[1]  self index     ARGV[2] region count n     ARGV[3] share units csv
  ARGV[4]  max clock skew ms                          ARGV[5] entry count m
  then 3 values per entry: period ms, window start ms, count

  Returns the number of entries written.
]]
--- @include "includes/clock"
--- @include "includes/federation"
--- @include "includes/window_decide"
--- @include "includes/bell"

local n = tonumber(ARGV[2])
local r = tonumber(ARGV[1])
local count = tonumber(ARGV[5])
local now = now_ms('')
local peers = n - 1
local pending = {}
for i = 1, peers do pending[i] = KEYS[i] end
local first_key = n > 1 and peers + 2 or 1

local written = 0
for i = 1, count do
  local base = 5 + (i - 1) * 3
  local key = KEYS[first_key - 1 + i]
  local period, start, cost = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3])
  local id = math.floor(start / period)
  local current = math.floor(now / period)
  -- A window in the future (the gateway's clock ahead of Redis): counted now, in the current window. Taken as
  -- given, its slot could be the current window's, whose counts it would replace.
  if id > current then id, start = current, now end
  local k = slot_index(id)
  local mark = redis.pcall('HGET', key, 'w' .. label(k))
  if type(mark) == 'table' then
    -- Not a hash: a token bucket's state under a rule redefined as a window (federation.lua load_silent says how).
    if not silent_string_to_hash(key) then redis.call('DEL', key) end
    mark = redis.call('HGET', key, 'w' .. label(k))
  end
  local held = tonumber(mark)
  if id > current - KEPT_WINDOWS and (held == nil or held <= id) then
    local p = { n = n, self = r, skew = tonumber(ARGV[4]), period = period }
    local state = load_state(key, n, n > 1, {}, { [k] = true }, function(plan, slot)
      if n > 1 then
        plan_row_cells(plan, n, slot, r, true, true, true)
      else
        plan_add(plan, 'c' .. label(slot) .. '.0', slot, 'c', 0)
      end
    end)
    if n > 1 then
      commit_window(p, state.slots, start, id, cost)
    else
      if state.slots[k].id ~= id then state.slots[k] = empty_slot(n, id, false) end
      state.slots[k].c[0] = state.slots[k].c[0] + cost
    end
    store_slots(state, state.slots)
    local ttl = 2 * period + p.skew + 1000
    if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
    if n > 1 then mark_changed(key, pending, now) end
    written = written + 1
  end
end
if n > 1 and written > 0 then ring_bell(KEYS[peers + 1], bell_lanes_of(pending)) end
return written
