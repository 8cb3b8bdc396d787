--[[
  Sliding-window counter: the previous window's global count, weighted by how much of it still overlaps the
  sliding window, plus the current window's. Constant state; smooths the fixed window's boundary burst.
  The federation bound is kept per window id exactly as for the fixed window (fixed_window.lua).
]]
local function sliding_window(rule, ctx, now)
  return window_rule(rule, ctx, now, true)
end
