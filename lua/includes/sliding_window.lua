--[[
  Sliding-window counter: the previous window's global count, weighted by how much of it still overlaps the
  sliding window, plus the current window's. Constant state; smooths the fixed window's boundary burst.
  The federation bound is kept per window id exactly as for the fixed window.
]]
local function sliding_window(rule, fed, now)
  local weight_of_previous = function(L, P, id, t)
    local prev = read_cells(rule.key, id - 1, fed.n)
    local overlap = 1 - (t - id * P) / P
    return global_view(prev, fed.n) * overlap
  end
  local decision = window_decision(rule, fed, now, weight_of_previous)
  if not decision.allowed and decision.retry_after > 0 then
    -- The estimate falls as the previous window slides out; a retry may succeed before the window ends.
    local P = rule.period
    local id = math.floor(now / P)
    local prev_total = global_view(read_cells(rule.key, id - 1, fed.n), fed.n)
    local cur_total = global_view(read_cells(rule.key, id, fed.n), fed.n)
    local need = rule.limit - cur_total - rule.cost
    if prev_total > 0 and need >= 0 then
      local overlap_needed = need / prev_total
      local at = id * P + math.ceil((1 - overlap_needed) * P)
      if at > now then decision.retry_after = math.max(1, at - now) end
    end
  end
  return decision
end
