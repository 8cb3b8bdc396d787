--[[
  decide_batch(KEYS, ARGV): several decide calls in one, for the single-region decide library
  (functions/decide_single.lua). Needs `decide` from includes/decide_single.lua. KEYS, ARGV and the reply as
  includes/decide_batch.lua documents them.

  A call whose arguments take decide_single.lua's one-rule path (one region, one fixed-window, sliding-window or
  token-bucket rule) goes straight to that path's function (single_fixed_window, single_sliding_window or
  single_token_bucket in single_region.lua) with the numbers decide would read from its ARGV, read once for a run
  of calls with the same arguments, and at the clock decide would take: the batch's TIME read or the call's own
  pinned clock.
  Every other call goes through `decide` as in decide_batch.lua. Both run under pcall, so an error still
  answers in its call's place only.
]]
--- @include "includes/batch"

local function decide_batch(keys, args)
  local count = tonumber(args[1])
  local add, add_one, done = batch_packer()
  -- The batch's clock: one TIME read, on first need.
  local clock = batch_clock_once()
  -- The current arguments: args[at + j] is ARGV[j] (j <= size); call_args their copy, once decide needs one.
  local at, size, call_args
  -- Their one-rule path, if they take it: the function, its numbers, and the pinned clock ('' for none).
  local single, limit, period, burst, cost, skew, shadow, pinned
  local k, a = 0, 1
  for i = 1, count do
    local nk, na = number_of(args[a + 1]), number_of(args[a + 2])
    a = a + 2
    if na >= 0 then
      at, size, call_args, single = a, na, nil, nil
      -- decide_single.lua's test: one region, one rule, a fixed or sliding window or a token bucket.
      local n, rule_count, override = read_call(args, a)
      -- (A peek takes decide: the one-rule paths always write what they admit.)
      if n == 1 and rule_count == 1 and not read_peek(args, a, rule_count) then
        local code
        code, limit, period, burst, cost, skew, shadow = read_first_rule(args, a, na)
        if code == 'fw' then
          single = single_fixed_window
        elseif code == 'tb' then
          single = single_token_bucket
        elseif code == 'sw' then
          single = single_sliding_window
        end
        if single ~= nil then
          -- now_ms(override)
          pinned = override
          if pinned ~= '' then pinned = tonumber(pinned) end
        end
      end
      a = a + na
    end
    if single ~= nil and nk >= 2 then
      local now = pinned
      if now == '' then now = clock() end
      -- single_reply's nine numbers: no false denial, the quota is the remaining, no lease.
      local ok, verdict, at, allowed, remaining, reset_at, retry_after =
        pcall(single, keys[k + 2], limit, period, burst, cost, skew, shadow, now)
      add_one(ok, verdict, at, allowed, remaining, reset_at, retry_after, 0, remaining, 0)
    else
      local call_keys = {}
      for j = 1, nk do call_keys[j] = keys[k + j] end
      if call_args == nil then
        call_args = {}
        for j = 1, size do call_args[j] = args[at + j] end
      end
      pin_clock(call_args, clock)
      add(pcall(decide, call_keys, call_args))
    end
    k = k + nk
  end
  return done()
end
