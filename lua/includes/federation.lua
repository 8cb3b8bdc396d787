--[[
  Federated window cells (see docs/architecture.md, "State hashes").
  A slot k = id mod 3 holds one window (or token-bucket epoch) id:
    w<k>            the id held by the slot
    c<k>.<o>        admitted by region o in that window
    x<k>.<o>.<d>    allowance (or share units) moved from o to d in that window
    a<k>.<o>.<d>    region o's acknowledged view of c.d
    f<k>            recovery fence already applied to this slot
  The federation context `fed` = { self, n, weights[0..n-1], skew, fence }.
]]
local function parse_weights(csv, n)
  local weights, i = {}, 0
  for part in string.gmatch(csv, '[^,]+') do weights[i] = tonumber(part); i = i + 1 end
  for j = i, n - 1 do weights[j] = 1 / n end
  return weights
end

local function empty_cells(id, n)
  local cells = { id = id, present = false, fenced = false, c = {}, x = {} }
  for o = 0, n - 1 do
    cells.c[o] = 0
    cells.x[o] = {}
    for d = 0, n - 1 do cells.x[o][d] = 0 end
  end
  return cells
end

-- Reads the c and x cells of window `id` (zeros when the slot holds another window).
local function read_cells(key, id, n)
  local k = id % 3
  local fields = { 'w' .. k, 'f' .. k }
  for o = 0, n - 1 do fields[#fields + 1] = 'c' .. k .. '.' .. o end
  for o = 0, n - 1 do
    for d = 0, n - 1 do
      if o ~= d then fields[#fields + 1] = 'x' .. k .. '.' .. o .. '.' .. d end
    end
  end
  local values = redis.call('HMGET', key, unpack(fields))
  local cells = empty_cells(id, n)
  if tonumber(values[1]) ~= id then return cells end
  cells.present = true
  cells.fenced = values[2] ~= false
  local i = 3
  for o = 0, n - 1 do cells.c[o] = tonumber(values[i]) or 0; i = i + 1 end
  for o = 0, n - 1 do
    for d = 0, n - 1 do
      if o ~= d then cells.x[o][d] = tonumber(values[i]) or 0; i = i + 1 end
    end
  end
  return cells
end

-- Makes slot (id mod 3) hold window `id`, dropping whatever older window it held.
-- Returns false when the slot holds a newer window (the caller must leave it alone).
local function claim_slot(key, id, n)
  local k = id % 3
  local held = tonumber(redis.call('HGET', key, 'w' .. k))
  if held == id then return true end
  if held ~= nil and held > id then return false end
  if held ~= nil then
    local stale = { 'f' .. k }
    for o = 0, n - 1 do
      stale[#stale + 1] = 'c' .. k .. '.' .. o
      for d = 0, n - 1 do
        if o ~= d then
          stale[#stale + 1] = 'x' .. k .. '.' .. o .. '.' .. d
          stale[#stale + 1] = 'a' .. k .. '.' .. o .. '.' .. d
        end
      end
    end
    redis.call('HDEL', key, unpack(stale))
  end
  redis.call('HSET', key, 'w' .. k, id)
  return true
end

-- Allowance of region r in window cells for a rule with limit L and budget B (B < 0: unbounded).
local function base_allowance(L, B, fed, r)
  if fed.n == 1 then return L end
  return math.floor(L * fed.weights[r]) + math.floor(math.max(B, 0) * fed.weights[r])
end

local function local_limit(cells, L, B, fed, r)
  local l = base_allowance(L, B, fed, r)
  for d = 0, fed.n - 1 do
    if d ~= r then l = l + cells.x[d][r] - cells.x[r][d] end
  end
  return l
end

local function global_view(cells, n)
  local total = 0
  for o = 0, n - 1 do total = total + cells.c[o] end
  return total
end

-- Share units (of SHARE_UNITS) held by r at time now in token-bucket epoch cells.
local SHARE_UNITS = 1000000
local function share_units(cells, prev, fed, r, now, period)
  if fed.n == 1 then return SHARE_UNITS end
  local units = math.floor(SHARE_UNITS * fed.weights[r])
  for d = 0, fed.n - 1 do
    if d ~= r then units = units + cells.x[d][r] - cells.x[r][d] end
  end
  if prev ~= nil and now - cells.id * period < fed.skew then
    for d = 0, fed.n - 1 do
      if d ~= r then units = units - prev.x[r][d] end
    end
  end
  return math.max(units, 0)
end

-- Marks a changed federated key for delivery to every peer (pending ZSETs scored by change version).
local function mark_changed(key, pending_keys, now)
  if #pending_keys == 0 then return end
  local version = redis.call('HINCRBY', key, 'v', 1)
  redis.call('HSET', key, 't', now)
  for _, pending in ipairs(pending_keys) do redis.call('ZADD', pending, version, key) end
end
