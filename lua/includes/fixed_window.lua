--[[
  Fixed window (and, with `sliding`, the sliding-window counter) for decide.lua: protocol.ts decideWindow,
  federated by demarcation (admit while own + cost <= own allowance and the global view + cost <= limit).
  rule = { key, limit, period, budget, cost }; ctx = the federation part of the parameters plus `fence`.
]]

--[[
  A single region is an exact limiter (allowance = the limit, no fence, no peers): decideWindow on the counts
  alone, which is all such a key stores. Returns the verdict, the current and previous window counts, and the
  store for an admission.
]]
local function single_region_window(p, rule, now, sliding)
  local P, L, cost = p.period, p.limit, rule.cost
  local id = math.floor(now / P)
  local k, kp = slot_index(id), slot_index(id - 1)
  local held = window_fields(rule.key, 'w' .. label(k), 'c' .. label(k) .. '.0', 'w' .. label(kp), 'c' .. label(kp) .. '.0')
  local count, previous = 0, 0
  if tonumber(held[1]) == id then count = tonumber(held[2]) or 0 end
  if tonumber(held[3]) == id - 1 then previous = tonumber(held[4]) or 0 end
  local remaining = math.max(0, math.min(L - count, L - count))
  if sliding then
    local elapsed = now - id * P
    local weighted = (previous * (P - elapsed)) / P
    remaining = math.max(0, math.min(remaining, math.floor(L - weighted - count)))
  end
  local verdict = { allowed = cost <= remaining, remaining = remaining, id = id }
  if verdict.allowed then verdict.remaining = remaining - cost end
  -- Exact: the federation's remaining quota is this region's.
  verdict.quota = verdict.remaining
  local function store()
    if tonumber(held[1]) ~= id then
      -- The slot held an older window (or nothing): drop its cells, then count from zero.
      local stale = new_plan()
      plan_cells(stale, 1, k, false)
      call_chunked('HDEL', rule.key, stale.names)
      redis.call('HSET', rule.key, 'w' .. label(k), fmt(id), 'c' .. label(k) .. '.0', fmt(cost))
    else
      redis.call('HSET', rule.key, 'c' .. label(k) .. '.0', fmt(count + cost))
    end
  end
  return verdict, count, previous, store
end

local function federated_window(p, rule, ctx, now, sliding)
  local n, r = p.n, p.self
  -- Read only what the decision and its write touch: the current window's counts, the transfers to and from
  -- this region, its acknowledgements and admission time, and (sliding) the previous window's counts.
  local id = math.floor(now / p.period)
  local current, previous = slot_index(id), slot_index(id - 1)
  local ids = { [current] = true }
  if sliding then ids[previous] = true end
  -- A silent key (federation.lua load_silent): this region's cells alone, in one short read.
  -- (decide_silent may have read the key's hash a moment ago in the same call: that reply, taken once.)
  local hash_read = rule.hash_read
  rule.hash_read = nil
  local state, flat = load_silent(rule.key, n, r, true, current, previous, window_ttl(p), hash_read)
  if state == nil then
    state = load_state(rule.key, n, true, {}, ids, function(plan, k)
      if k == current then
        plan_row_cells(plan, n, k, r, true, true, true)
      else
        for o = 0, n - 1 do plan_add(plan, 'c' .. label(k) .. '.' .. label(o), k, 'c', o) end
      end
    end, decision_shape('w|', n, r, current, sliding and previous or -1), flat)
  end
  local verdict = decide_window(p, state.slots, ctx.fence, now, rule.cost, sliding)
  -- Both return true when they wrote the key's TTL too (a silent string: federation.lua store_silent).
  local function store()
    commit_window(p, state.slots, now, id, rule.cost)
    return store_slots(state, state.slots)
  end
  -- A false denial is demand (protocol.ts decideWindow): this region's t in the window, nothing else.
  local function touch()
    local k = slot_index(id)
    if state.slots[k].id ~= id then state.slots[k] = empty_slot(n, id, true) end
    state.slots[k].t[r] = math.max(state.slots[k].t[r], now)
    return store_slots(state, state.slots)
  end
  local counts = sum_cells(cells_of(state.slots, id, n, true).c, n)
  local before = sum_cells(cells_of(state.slots, id - 1, n, true).c, n)
  if window_forfeited(p, ctx.fence, id) then before = -1 end
  -- How an admission goes to the peers (admission_gossip.lua), from the state before it.
  local cells = cells_of(state.slots, id, n, true)
  local allowance = math.huge
  if not p.unbounded then allowance = window_allowance(p, cells, r, id) end
  verdict.gossip = admission_gossip(peer_talks(cells, n, r), cells.c[r], cells.c[r], cells.t[r], allowance - cells.c[r] - rule.cost,
    allowance, rule.cost, silent_share(p), p.horizon, now)
  return verdict, counts, before, store, touch
end

local function window_rule(rule, ctx, now, sliding)
  local p = decide_params(rule, ctx)
  local verdict, current, previous, store, touch
  if ctx.n == 1 then
    verdict, current, previous, store = single_region_window(p, rule, now, sliding)
  else
    verdict, current, previous, store, touch = federated_window(p, rule, ctx, now, sliding)
  end
  local reset_at = (verdict.id + 1) * p.period
  local decision = {
    allowed = verdict.allowed,
    remaining = verdict.remaining,
    quota = verdict.quota,
    reset_at = reset_at,
    retry_after = verdict.allowed and 0 or math.max(1, reset_at - now),
    federated = ctx.n > 1,
    gossip = verdict.gossip,
    false_denial = verdict.false_denial == true,
  }
  -- (previous < 0: the window is forfeited, nothing helps before it ends.)
  if sliding and not verdict.allowed and previous > 0 then
    -- The estimate falls as the previous window slides out; a retry may succeed before the window ends.
    local need = p.limit - current - rule.cost
    if need >= 0 then
      local at = verdict.id * p.period + math.ceil((1 - need / previous) * p.period)
      if at > now then decision.retry_after = math.max(1, at - now) end
    end
  end
  decision.commit = function()
    if not store() then redis.call('PEXPIRE', rule.key, window_ttl(p)) end
  end
  if touch then
    decision.touch = function()
      if not touch() then redis.call('PEXPIRE', rule.key, window_ttl(p)) end
    end
  end
  return decision
end

local function fixed_window(rule, ctx, now)
  return window_rule(rule, ctx, now, false)
end
