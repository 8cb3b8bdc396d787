--[[
  A silent window (fixed or sliding) decided in scalars, for decide.lua's decide_silent: the nine values of the very
  reply the general path gives (window_rule over federated_window's silent view: load_silent, decide_window,
  admission_gossip, commit_window and store_silent), without its slot tables and closures, when the key is this
  region's window string or absent and the decision needs no message: an admission that stays silent, or a denial that
  is not false. Nil, with nothing written, for anything else (a hash, another layout's string, a loud admission, a
  false denial): the general path decides it then, given the HGETALL reply this read when it read one
  (rule.hash_read, as silent_bucket.lua does).

  A silent key holds no cell of another region and no transfer (federation.lua load_silent), so in the window's view
  every sum over the regions is this region's own count, every net transfer 0 and no peer talks: the same float
  operations on the same numbers as decide_window (window_decide.lua) and federated_window (fixed_window.lua), in the
  same order. The differential test (test/federation/differential.test.ts) runs every new window key through here
  against protocol.ts.
]]
local function decide_silent_window(p, rule, fence, now, sliding)
  local r, P, L, cost = p.self, p.period, p.limit, rule.cost
  local id = math.floor(now / P)
  local k, kp = slot_index(id), slot_index(id - 1)
  local values, _, read = own_silent_values(rule.key, label(r), window_string_values)
  if values == nil then
    -- A hash (read here when it was hinted: the general path takes the reply), or a string to convert first.
    rule.hash_read = read
    return nil
  end
  -- This region's cells of the current window and of the one before, as load_silent places them (0 when the slot
  -- holds another window or nothing).
  local at = 5 + 3 * k
  local own_c, own_t, own_a, before = 0, 0, 0, 0
  local current_id = tonumber(values[2 + k])
  if current_id == id then
    own_c, own_t, own_a = tonumber(values[at]) or 0, tonumber(values[at + 1]) or 0, tonumber(values[at + 2]) or 0
  end
  if tonumber(values[2 + kp]) == id - 1 then before = tonumber(values[5 + 3 * kp]) or 0 end

  -- decide_window over that view: global = own_c, net transfers 0.
  local base = window_bases(p, id)[r]
  local allowance = base - own_c
  local room = L - own_c
  if sliding then
    local elapsed = now - id * P
    local weighted = (before * (P - elapsed)) / P
    room = math.min(room, math.floor(L - weighted - own_c))
  end
  local remaining = math.max(0, math.min(allowance, room))
  local reset_at = (id + 1) * P
  if window_forfeited(p, fence, id) then
    -- Nothing helps before the window ends (window_rule: `before` is -1 then, no sliding retry).
    return 0, now, 0, 0, reset_at, math.max(1, reset_at - now), 0, 0, 0
  end
  if cost > remaining then
    -- A false denial (the federation may have room) goes to the general path: it touches and sends the key.
    if cost <= room then return nil end
    local retry_after = math.max(1, reset_at - now)
    if sliding and before > 0 then
      -- The estimate falls as the previous window slides out (window_rule).
      local need = L - own_c - cost
      if need >= 0 then
        local retry_at = id * P + math.ceil((1 - need / before) * P)
        if retry_at > now then retry_after = math.max(1, retry_at - now) end
      end
    end
    return 0, now, 0, remaining, reset_at, retry_after, 0, math.max(remaining, room, 0), 0
  end
  -- An admission that stays silent (federated_window's gossip over the view before it), else the general path.
  local gossip = admission_gossip(false, own_c, own_c, own_t, base - own_c - cost, base, cost, silent_share(p), p.horizon,
    now)
  if gossip ~= 'silent' then return nil end
  -- commit_window (a slot that held another window starts empty) and store_silent's string, with its TTL.
  local c = own_c + cost
  local a = own_a
  if c > a then a = c end
  values[2 + k] = id
  values[at] = c ~= 0 and c
  values[at + 1] = math.max(own_t, now)
  values[at + 2] = a ~= 0 and a
  if values[at + 1] == 0 then values[at + 1] = false end
  redis.call('SET', rule.key, window_string_packed(values), 'PX', window_ttl(p))
  return 1, now, 1, remaining - cost, reset_at, 0, 0, math.max(remaining - cost, room - cost, 0), 0
end
