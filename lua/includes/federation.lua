--[[
  Federated key state as src/federation/protocol.ts models it (docs/architecture.md, "State hashes").
  Slot k = id mod 3 holds one window (or token-bucket epoch) id:
    w<k>            the id held by the slot (absent: an empty slot, id -1)
    c<k>.<o>        cost admitted by region o
    x<k>.<o>.<d>    allowance (share units for token buckets) moved from o to d
    a<k>.<o>.<d>    windows: region o's acknowledged view of c.d; token buckets: y, the tokens o moved to d
    t<k>.<o>        region o's clock at its last admission (demand recency)
  Zero cells are not stored. Numbers are written with fmt (fmt.lua): as %.17g writes them, so fractional tokens
  read back as the very same double.
  The parameters `p` mirror protocol.ts FederationParams:
    { n, self, units[0..n-1], limit, period, capacity, budget, unbounded, skew, policy }
  with policy = { hunger, reserve, give, min_surplus, idle } (REBALANCE; merges and sweeps only, rebalance.lua).
  The request path reads and writes only the fields its decision touches (plan_row_cells).
]]
local SHARE_UNITS = 1000000
local KEPT_WINDOWS = 3

-- A silent key's one-string form (state layouts 3 and 4), turned into its hash before any other write.
--- @include "includes/silent_string"

--- @include "includes/fmt"
--- @include "includes/fmt_short"

local function parse_units(csv, n)
  local units, i = {}, 0
  for part in string.gmatch(csv, '[^,]+') do
    units[i] = tonumber(part)
    i = i + 1
  end
  if i ~= n then error('expected ' .. n .. ' share units, got ' .. i) end
  return units
end

-- The rule part of the parameters; budget < 0 means unbounded.
local function rule_params(base, limit, period, capacity, budget)
  local p = {}
  for name, value in pairs(base) do p[name] = value end
  p.limit, p.period, p.capacity = limit, period, capacity
  p.unbounded = budget < 0
  p.budget = math.max(budget, 0)
  -- What is kept on parameters for their rule (bucket_budget, silent_view) is not the base's.
  p.budget_part, p.silent_view = nil, nil
  return p
end

--[[
  A decide call's parameters for `rule` (rule_params of the call's context), built once per rule table: a
  batch's calls with the same arguments share the rule and the context, and only the context's fence differs
  between them, which the parameters leave out (the algorithms read the fence from the context).
]]
local function decide_params(rule, ctx)
  local p = rule.params
  if p == nil then
    p = rule_params(ctx, rule.limit, rule.period, rule.burst, rule.budget)
    p.fence = nil
    rule.params = p
  end
  return p
end

-- floor(X·ω) in exact integer arithmetic (X·u < 2^53).
local function portion(amount, units)
  return math.floor((amount * units) / SHARE_UNITS)
end

local function slot_index(id)
  return id % KEPT_WINDOWS
end

local empty_slot
do
  -- n - 1 zeros per region count: a cell row built by one constructor ({ [0] = 0, unpack(tail) }) is sized once,
  -- where setting its n cells one by one grew (and rehashed) it on the way.
  local tails = {}
  local function zeros(n)
    local tail = tails[n]
    if tail == nil then
      tail = {}
      for i = 1, n - 1 do tail[i] = 0 end
      tails[n] = tail
    end
    return { [0] = 0, unpack(tail) }
  end
  function empty_slot(n, id, with_a)
    local x = zeros(n)
    for o = 0, n - 1 do x[o] = zeros(n) end
    local slot = { id = id, c = zeros(n), x = x, t = zeros(n) }
    if with_a then
      local a = zeros(n)
      for o = 0, n - 1 do a[o] = zeros(n) end
      slot.a = a
    end
    return slot
  end
end

-- The table at memo[key], made empty on first use: the memos below are keyed twice (memo[a][b]).
local function memo_row(memo, key)
  local row = memo[key]
  if row == nil then
    row = {}
    memo[key] = row
  end
  return row
end

--[[
  One shared empty slot (id -1) per region count and shape: empty slots and the zeros of cells_of are read many
  times per call and must never be mutated. Every write path first puts a slot of its own in place (a new window, a
  join). A Functions library keeps them between calls (building them was a twentieth of a loud decision); the
  differential test runs its steps through the library, so a slot written in place would show there.
]]
local zero_slots = {}
local function zero_slot(n, with_a)
  local by_count = memo_row(zero_slots, n)
  local shape = with_a and 'a' or 'x'
  local zero = by_count[shape]
  if zero == nil then
    zero = empty_slot(n, -1, with_a)
    by_count[shape] = zero
  end
  return zero
end

local function empty_slots(n, with_a)
  local zero = zero_slot(n, with_a)
  return { [0] = zero, [1] = zero, [2] = zero }
end

-- The cells of window `id`, zeros when its slot holds another window. Never mutate the result.
local function cells_of(slots, id, n, with_a)
  local slot = slots[slot_index(id)]
  if slot.id == id then return slot end
  return zero_slot(n, with_a)
end

local function sum_cells(values, n)
  local total = 0
  for o = 0, n - 1 do total = total + values[o] end
  return total
end

-- Σ_{o≠d} x[o][d] − Σ_{o≠d} x[d][o]
local function net_transfer(slot, n, d)
  local net = 0
  for o = 0, n - 1 do
    if o ~= d then net = net + (slot.x[o][d] - slot.x[d][o]) end
  end
  return net
end

-- What r holds of d's allowance (share) in one slot: what d gave r less what r gave d, when positive
-- (protocol.ts heldFrom).
local function held_from(slot, r, d)
  return math.max(0, slot.x[d][r] - slot.x[r][d])
end

-- What a return hands back to each peer d (0 for r): what r holds of d's, in index order, as far as `spare`
-- covers it; nil when the total is below max(1, min_surplus) (protocol.ts returnAmounts).
local function return_amounts(slot, n, r, spare, min_surplus)
  local amounts, left, total = {}, math.max(0, spare), 0
  for d = 0, n - 1 do
    local amount = 0
    if d ~= r then amount = math.min(held_from(slot, r, d), left) end
    amounts[d] = amount
    left = left - amount
    total = total + amount
  end
  if total < math.max(1, min_surplus) then return nil end
  return amounts
end


--[[
  A field plan: which hash fields to read and where they go (parallel arrays: names, k, kind, o, d; cells c and
  t have no d). plan_cells adds every cell of slot k; the request path adds only the cells its decision and
  its write touch (plan_row_cells), so it reads and writes a handful of fields instead of the whole key.
]]
-- Field names are built from small integers; Lua turns a number into a string with sprintf, so each one is
-- converted once per call.
local labels = {}
local function label(i)
  local text = labels[i]
  if text == nil then
    text = tostring(i)
    labels[i] = text
  end
  return text
end

-- Region r's own field names of slot k: its count and time (c<k>.<r>, t<k>.<r>), its count in the slot before
-- (c<kp>.<r>, kp the previous epoch's or window's slot) and the slot's id (w<k>). Built once per library load.
local own_names = {}
local function own_slot_names(r, k)
  local by_region = memo_row(own_names, r)
  local names = by_region[k]
  if names == nil then
    local own = '.' .. tostring(r)
    local kp = (k + KEPT_WINDOWS - 1) % KEPT_WINDOWS
    names = { 'c' .. tostring(k) .. own, 't' .. tostring(k) .. own, 'c' .. tostring(kp) .. own, 'w' .. tostring(k) }
    by_region[k] = names
  end
  return names
end

-- An HGETALL reply as name -> text.
local function hash_map(flat)
  local f = {}
  for j = 1, #flat, 2 do f[flat[j]] = flat[j + 1] end
  return f
end

--[[
  A key's hash for a decision's silent test (load_silent; silent_bucket.lua): read once with HGETALL, then HMGET's
  reply for `names` (a list whose first name is z) when the key is silent, or nil, the HGETALL reply and that reply as
  name -> text (hash_map) when it is loud (no z, and one of the other names held): load_state reads the reply
  (`flat`) and the loud bucket (loud_bucket.lua) the map instead of the key. A loud key's decision read its hash
  twice before (a short HMGET that found no z, then HGETALL). `flat` is an HGETALL reply already read (nil: read the
  key).
]]
local function silent_hash_read(key, names, flat)
  if flat == nil then flat = redis.call('HGETALL', key) end
  local f = hash_map(flat)
  -- Loud: no z, and one of the other names held (told from the map, before the HMGET-like reply is built).
  if not f[names[1]] then
    for i = 2, #names do
      if f[names[i]] then return nil, flat, f end
    end
  end
  local values = {}
  for i = 1, #names do values[i] = f[names[i]] or false end
  return values, nil
end

-- Renews the labels memo. An EVAL starts with fresh tables; a Functions library keeps its upvalues between calls,
-- so decide renews them first and every call sees what an EVAL would (the memos of names, shapes, plans and zero
-- slots depend on nothing a call changes and are kept).
local function renew_memos()
  labels = {}
end

local function plan_add(plan, name, k, kind, o, d)
  local i = #plan.names + 1
  plan.names[i], plan.k[i], plan.kind[i], plan.o[i], plan.d[i] = name, k, kind, o, d
end

local function plan_cells(plan, n, k, with_a)
  local slot = label(k) .. '.'
  for o = 0, n - 1 do plan_add(plan, 'c' .. slot .. label(o), k, 'c', o) end
  for o = 0, n - 1 do
    local row = slot .. label(o) .. '.'
    for d = 0, n - 1 do plan_add(plan, 'x' .. row .. label(d), k, 'x', o, d) end
    if with_a then
      for d = 0, n - 1 do plan_add(plan, 'a' .. row .. label(d), k, 'a', o, d) end
    end
  end
  for o = 0, n - 1 do plan_add(plan, 't' .. slot .. label(o), k, 't', o) end
end

--[[
  Region r's part of slot k: the transfers to and from r (x[r][·], x[·][r]); with `own`, also c[r], t[r] and
  (with_a) a[r][·]; with `counts`, every c[o].
]]
local function plan_row_cells(plan, n, k, r, with_a, own, counts)
  local slot = label(k) .. '.'
  local row, column = slot .. label(r) .. '.', '.' .. label(r)
  if counts then
    for o = 0, n - 1 do plan_add(plan, 'c' .. slot .. label(o), k, 'c', o) end
  elseif own then
    plan_add(plan, 'c' .. slot .. label(r), k, 'c', r)
  end
  for d = 0, n - 1 do plan_add(plan, 'x' .. row .. label(d), k, 'x', r, d) end
  for o = 0, n - 1 do
    if o ~= r then plan_add(plan, 'x' .. slot .. label(o) .. column, k, 'x', o, r) end
  end
  if own then
    if with_a then
      for d = 0, n - 1 do plan_add(plan, 'a' .. row .. label(d), k, 'a', r, d) end
    end
    plan_add(plan, 't' .. slot .. label(r), k, 't', r)
  end
end

local function new_plan()
  return { names = {}, k = {}, kind = {}, o = {}, d = {} }
end

-- unpack() is bounded by the Lua C stack: long argument lists go in chunks.
local CHUNK = 1000
local function call_chunked(command, key, list)
  for from = 1, #list, CHUNK do
    local args = {}
    for i = from, math.min(#list, from + CHUNK - 1) do args[#args + 1] = list[i] end
    redis.call(command, key, unpack(args))
  end
end

local function hmget(key, names)
  if #names <= CHUNK then return redis.call('HMGET', key, unpack(names)) end
  local values = {}
  for from = 1, #names, CHUNK do
    local part = {}
    for i = from, math.min(#names, from + CHUNK - 1) do part[#part + 1] = names[i] end
    local got = redis.call('HMGET', key, unpack(part))
    for i = 1, #got do values[#values + 1] = got[i] end
  end
  return values
end

--[[
  Loads a key's slots and the named extra fields (raw strings or false). `ids` says which slots to read (nil:
  all); `cells(plan, k)` adds the cells of slot k to read (nil: all of them). A cell not read stays 0 in
  `slots` and is never written back. Returns { key, n, with_a, slots, extra, ... } for store_slots, which
  writes back only what changed.
]]
local function build_plan(n, with_a, extra_names, ids, cells)
  local plan = new_plan()
  for k = 0, KEPT_WINDOWS - 1 do
    if ids == nil or ids[k] then
      local i = #plan.names + 1
      plan.names[i], plan.k[i], plan.kind[i] = 'w' .. label(k), k, 'w'
    end
  end
  local id_fields = #plan.names
  for k = 0, KEPT_WINDOWS - 1 do
    if ids == nil or ids[k] then
      if cells == nil then plan_cells(plan, n, k, with_a) else cells(plan, k) end
    end
  end
  local names = plan.names
  local slot_fields = #names
  for _, name in ipairs(extra_names) do names[#names + 1] = name end
  return plan, id_fields, slot_fields
end

-- Read plans by shape: a plan (the field names to read and where each goes) depends only on what its `shape`
-- string names, so it is built once per script run (once per library load for Functions) instead of once per
-- key: building the ~75 names of a three-region key was most of a sweep's time. A plan is only read once built
-- (store_slots reads names, kinds and indexes).
local cached_plans = {}

-- The shape (load_state) of a decision's read plan: `kind` names the key's kind and the extra fields read (a constant
-- string per caller), then region `r` of `n` (r < 1024) and the slots of the current window/epoch and of the one
-- before it that are read (-1: none). Built once per library load: building the string per decision cost a loud
-- one about a tenth.
local decision_shapes = {}
local function decision_shape(kind, n, r, current, previous)
  local by_kind = memo_row(decision_shapes, kind)
  local code = ((n * 1024 + r) * (KEPT_WINDOWS + 1) + current + 1) * (KEPT_WINDOWS + 1) + previous + 1
  local shape = by_kind[code]
  if shape == nil then
    shape = kind .. ':' .. n .. ':' .. r .. ':' .. current .. ':' .. previous
    by_kind[code] = shape
  end
  return shape
end

-- Cell i of the plan, read as `raw`, into its slot (and into `old`, what store_slots compares with).
local function place_cell(state, slots, plan, i, raw)
  local value = number_of(raw) or 0
  state.old[i] = value
  -- A slot without an id reads as zeros (stale cells are deleted on the next write).
  local slot = slots[plan.k[i]]
  if slot.id >= 0 then
    local kind, o, d = plan.kind[i], plan.o[i], plan.d[i]
    if d == nil then slot[kind][o] = value else slot[kind][o][d] = value end
  end
end

-- `shape` names everything `ids`, `cells` and `extra_names` depend on (nil: build the plan for this call alone);
-- a whole-key read (ids and cells nil) is cached by n, with_a and the extra names. `flat`: the key's HGETALL reply
-- when the caller has read it already (silent_bucket.lua, a loud hash); a plan with a shape reads it, not the key.
local function load_state(key, n, with_a, extra_names, ids, cells, shape, flat)
  if shape == nil and ids == nil and cells == nil then
    shape = tostring(n) .. (with_a and 'a' or 'x') .. '|' .. table.concat(extra_names, ',')
  end
  local plan, id_fields, slot_fields, index
  if shape ~= nil then
    local cached = cached_plans[shape]
    if cached == nil then
      cached = { build_plan(n, with_a, extra_names, ids, cells) }
      -- Field name -> its place in the plan, for reading the key with HGETALL.
      cached[4] = {}
      for i, name in ipairs(cached[1].names) do cached[4][name] = i end
      cached_plans[shape] = cached
    end
    plan, id_fields, slot_fields, index = cached[1], cached[2], cached[3], cached[4]
  else
    plan, id_fields, slot_fields = build_plan(n, with_a, extra_names, ids, cells)
  end
  local state = { key = key, n = n, with_a = with_a, plan = plan, slot_fields = slot_fields, old = {}, extra = {}, held = {} }
  local slots = empty_slots(n, with_a)
  state.slots = slots
  if index ~= nil then
    -- The fields the key holds (a few dozen at most) instead of every name the plan may read (28 for a bucket
    -- decision of three regions, 75 for a whole read), and only the plan's are looked at: one pass over the hash
    -- where HMGET searches it once per name; `old` is sparse (a cell not held is 0: store_slots).
    if flat == nil then flat = redis.call('HGETALL', key) end
    for k = 0, KEPT_WINDOWS - 1 do state.held[k] = -1 end
    for _, name in ipairs(extra_names) do state.extra[name] = false end
    for j = 1, #flat, 2 do
      local i = index[flat[j]]
      if i ~= nil then
        if i <= id_fields then
          local id = number_of(flat[j + 1])
          if id ~= nil then
            state.held[plan.k[i]] = id
            slots[plan.k[i]] = empty_slot(n, id, with_a)
          end
        elseif i > slot_fields then
          state.extra[extra_names[i - slot_fields]] = flat[j + 1]
        end
      end
    end
    for j = 1, #flat, 2 do
      local i = index[flat[j]]
      if i ~= nil and i > id_fields and i <= slot_fields then place_cell(state, slots, plan, i, flat[j + 1]) end
    end
    return state
  end
  local values = hmget(key, plan.names)
  for i = 1, id_fields do
    local id = number_of(values[i])
    state.held[plan.k[i]] = id or -1
    if id ~= nil then slots[plan.k[i]] = empty_slot(n, id, with_a) end
  end
  for i = id_fields + 1, slot_fields do place_cell(state, slots, plan, i, values[i]) end
  for j, name in ipairs(extra_names) do state.extra[name] = values[slot_fields + j] end
  return state
end

--[[
  A silent key: field z = 1 says the hash holds no cell of another region and no transfer, only this region's
  slot ids and its own c, t and (windows) a[r][r]. Every key starts so; apply_gossip.lua and sweep_watch.lua drop
  z when they write (a peer's cells or a transfer arrive only through them), and the other writers (decide,
  settle_fallback, refund) write only this region's cells. A key without z is read by load_state.
  The request path reads a silent key with one GET of its string or one HGETALL of its hash, of which it uses z, the
  slot ids and this region's cells of the current and previous slot, and decides it with the same functions over a
  view whose other cells are the shared zeros; the decision is the one load_state's view would give (the cells it
  does not read are 0).
]]
local function silent_slot(n, id, r, with_a)
  local zero = zero_slot(n, with_a)
  local slot = { id = id, c = {}, t = {}, x = zero.x }
  for o = 0, n - 1 do slot.c[o], slot.t[o] = 0, 0 end
  if with_a then
    -- Only this region's acknowledgement row is ever written (acknowledge); the others stay the shared zeros.
    slot.a = {}
    for o = 0, n - 1 do slot.a[o] = zero.a[o] end
    slot.a[r] = {}
    for d = 0, n - 1 do slot.a[r][d] = 0 end
  end
  return slot
end

--[[
  Loads a silent key for a decision at slot `current` (and `previous`, whose own count it reads too). Returns nil
  when the key holds state but no z (load_state then reads it); a key with no state at all loads as silent.
  Given `ttl` (a window's decision), a new key and this region's window string (silent_string.lua) are read with
  one GET and written back with one SET PX `ttl` (store_silent returns true then); a hash with one HGETALL
  (silent_hash_read), whose reply comes back as the second value beside nil when the key is loud. `hash_read`: the
  key's HGETALL reply read a moment ago in the same call (decide.lua's decide_silent), taken instead of a read.
]]
-- A string a window does not read as its own (a bucket's state under a rule redefined as a window, docs/federation.md
-- §7; another region's string, the regions renumbered): the hash it stands for, as a bucket's hash always was to a
-- window; a single region's number is dropped, as the single-region window path does (gcra.lua window_fields).
local function window_hash_of_other(key)
  if not silent_string_to_hash(key) then redis.call('DEL', key) end
end

-- The names load_silent reads, once per library load: z, the slot ids, region r's c and t of slot `current`, its c
-- of slot `previous` and (with_a) its a of `current`.
local window_silent_names = {}
local function window_silent_names_of(r, current, previous, with_a)
  local row = memo_row(memo_row(window_silent_names, r), with_a)
  local code = current * KEPT_WINDOWS + previous
  local names = row[code]
  if names == nil then
    local own = '.' .. tostring(r)
    local kc = tostring(current)
    names = { 'z', 'w0', 'w1', 'w2', 'c' .. kc .. own, 't' .. kc .. own, 'c' .. tostring(previous) .. own }
    if with_a then names[8] = 'a' .. kc .. own .. own end
    row[code] = names
  end
  return names
end

local function load_silent(key, n, r, with_a, current, previous, ttl, hash_read)
  local names = window_silent_names_of(r, current, previous, with_a)
  local string_values, other, read = nil, false, hash_read
  if ttl ~= nil and with_a and read == nil then
    string_values, other, read = own_silent_values(key, label(r), window_string_values)
  end
  if other then window_hash_of_other(key) end
  local values
  if string_values ~= nil then
    -- HMGET's reply for the string, as numbers: z = 1, then as `names` asks (false when absent).
    local at = 5 + 3 * current
    local v = string_values
    values = { '1', v[2], v[3], v[4], v[at], v[at + 1], v[5 + 3 * previous], v[at + 2] }
  else
    local flat = read or redis.pcall('HGETALL', key)
    if flat.err then
      -- Not a hash (read without `ttl`).
      window_hash_of_other(key)
      flat = redis.call('HGETALL', key)
    end
    local loud
    values, loud = silent_hash_read(key, names, flat)
    if values == nil then return nil, loud end
  end
  local slots = empty_slots(n, with_a)
  local held = {}
  for k = 0, KEPT_WINDOWS - 1 do
    local id = tonumber(values[2 + k])
    held[k] = id or -1
    if id ~= nil then slots[k] = silent_slot(n, id, r, with_a) end
  end
  local old = { c = tonumber(values[5]) or 0, t = tonumber(values[6]) or 0, a = 0 }
  if with_a then old.a = tonumber(values[8]) or 0 end
  local slot = slots[current]
  if slot.id >= 0 then
    slot.c[r], slot.t[r] = old.c, old.t
    if with_a then slot.a[r][r] = old.a end
  end
  if slots[previous].id >= 0 then slots[previous].c[r] = tonumber(values[7]) or 0 end
  return {
    key = key, n = n, with_a = with_a, silent = true, had_z = values[1] ~= false, self = r, current = current,
    held = held, old = old, slots = slots, extra = {}, string = string_values, ttl = ttl,
  }
end

-- One of this region's cells in a silent key's write: set when it changed, deleted when it turned 0 (zero cells are
-- not stored).
local function silent_cell(sets, dels, name, value, old)
  if value == 0 then
    if old ~= 0 then dels[#dels + 1] = name end
  elseif value ~= old then
    sets[#sets + 1] = name
    sets[#sets + 1] = fmt(value)
  end
end

-- Writes a silent key's current slot back (decisions write no other): its id if new, this region's cells as
-- they differ from what was loaded (a replaced slot's fields are the old window's, so the same rule applies),
-- and z on a new key; `sets` (field, value pairs) go in the same HSET. A key loaded as a window string is written
-- as one, with its TTL: returns true then (the caller sets no TTL of its own).
local function store_silent(state, slots, sets)
  local k, r = state.current, state.self
  local slot = slots[k]
  local values = state.string
  if values ~= nil then
    -- The window's string: the current slot as the hash's write below leaves it (a zero cell is an absent field).
    if slot.id >= 0 then
      local at = 5 + 3 * k
      values[2 + k] = slot.id
      values[at] = slot.c[r] ~= 0 and slot.c[r]
      values[at + 1] = slot.t[r] ~= 0 and slot.t[r]
      values[at + 2] = slot.a[r][r] ~= 0 and slot.a[r][r]
    end
    redis.call('SET', state.key, window_string_packed(values), 'PX', state.ttl)
    if #sets == 0 then return true end
    -- Other fields too: the hash from now on.
    silent_string_to_hash(state.key)
    redis.call('HSET', state.key, unpack(sets))
    return true
  end
  local dels = {}
  if not state.had_z then
    sets[#sets + 1] = 'z'
    sets[#sets + 1] = '1'
  end
  if slot.id >= 0 then
    local kl, own = label(k), '.' .. label(r)
    if slot.id ~= state.held[k] then
      sets[#sets + 1] = 'w' .. kl
      sets[#sets + 1] = fmt(slot.id)
    end
    silent_cell(sets, dels, 'c' .. kl .. own, slot.c[r], state.old.c)
    silent_cell(sets, dels, 't' .. kl .. own, slot.t[r], state.old.t)
    if state.with_a then silent_cell(sets, dels, 'a' .. kl .. own .. own, slot.a[r][r], state.old.a) end
  end
  if #dels > 0 then redis.call('HDEL', state.key, unpack(dels)) end
  if #sets > 0 then redis.call('HSET', state.key, unpack(sets)) end
end

-- Writes the slots back: what differs from what was loaded. A slot now holding another window loses every
-- cell of the window it held first (all of them, also those that were not read, a/y cells included).
-- `sets` (optional field, value pairs) go in the same HSET.
-- Every cell name of slot k (with acknowledgements), built once per script run: a slot that moved to another
-- window has them all deleted.
local slot_cell_lists = {}
local function slot_cell_names(n, k)
  local shape = tostring(n) .. ':' .. tostring(k)
  local names = slot_cell_lists[shape]
  if names == nil then
    local all = new_plan()
    plan_cells(all, n, k, true)
    names = all.names
    slot_cell_lists[shape] = names
  end
  return names
end

local function store_slots(state, slots, sets)
  if sets == nil then sets = {} end
  if state.silent then return store_silent(state, slots, sets) end
  local plan = state.plan
  local dels, reset = {}, {}
  for k, held in pairs(state.held) do
    if held >= 0 and slots[k].id ~= held then
      reset[k] = true
      for _, name in ipairs(slot_cell_names(state.n, k)) do dels[#dels + 1] = name end
    end
  end
  for i = 1, state.slot_fields do
    local name, k = plan.names[i], plan.k[i]
    local slot = slots[k]
    local kind = plan.kind[i]
    if kind == 'w' then
      if slot.id >= 0 and slot.id ~= state.held[k] then
        sets[#sets + 1] = name
        sets[#sets + 1] = fmt(slot.id)
      elseif slot.id < 0 and state.held[k] >= 0 then
        dels[#dels + 1] = name
      end
    else
      local value = 0
      if slot.id >= 0 then
        local o, d = plan.o[i], plan.d[i]
        if d == nil then value = slot[kind][o] else value = slot[kind][o][d] end
      end
      local old = state.old[i] or 0
      if reset[k] then old = 0 end
      if value ~= old then
        if value == 0 then
          dels[#dels + 1] = name
        else
          sets[#sets + 1] = name
          -- An `a` cell (a bucket's moved tokens y) is often a short decimal: stored in its shortest exact text.
          if kind == 'a' then sets[#sets + 1] = fmt_short(value) else sets[#sets + 1] = fmt(value) end
        end
      end
    end
  end
  if #dels > 0 then call_chunked('HDEL', state.key, dels) end
  if #sets > 0 then call_chunked('HSET', state.key, sets) end
end

--[[
  The recovery fence of the shard; a missing marker means this Redis lost its data: fence at `now`. `memo` (a table
  of one script call, or nil) keeps each marker's fence once read: within one call a marker changes only here, so
  reading it again would answer the same (decide_batch.lua reads each shard's marker once per batch).
]]
local function shard_fence(marker, now, memo)
  if memo ~= nil then
    local known = memo[marker]
    if known ~= nil then return known end
  end
  local fence = redis.call('HGET', marker, 'fence')
  if fence == false then
    redis.call('HSET', marker, 'fence', fmt(now))
    fence = now
  else
    fence = tonumber(fence)
  end
  if memo ~= nil then memo[marker] = fence end
  return fence
end

-- The peer index of a pending set, whose name ends in :p:<peer> (keys.ts peerPendingKey); nil for another name.
-- Read once per name: a loud decision asks it of every set it marks, and the names are the shards' few (a Functions
-- library keeps the memo between calls; false stands for a name without an index).
local pending_peers = {}
local function pending_peer(set)
  local peer = pending_peers[set]
  if peer == nil then
    peer = tonumber(string.match(set, ':p:(%d+)$')) or false
    pending_peers[set] = peer
  end
  return peer or nil
end

-- Marks a changed federated key for delivery to every peer (pending ZSETs scored by change version).
local function mark_changed(key, pending_keys, now)
  if #pending_keys == 0 then return end
  local version = redis.pcall('HINCRBY', key, 'v', 1)
  if type(version) == 'table' then
    -- A silent bucket's string (silent_string.lua) that turns loud: its hash from now on.
    if not silent_string_to_hash(key) then error(version) end
    version = redis.call('HINCRBY', key, 'v', 1)
  end
  redis.call('HSET', key, 't', fmt(now))
  for _, pending in ipairs(pending_keys) do redis.call('ZADD', pending, version, key) end
end

-- A window key lives until its window is out of the kept range.
local function window_ttl(p)
  return 2 * p.period + p.skew + 1000
end
