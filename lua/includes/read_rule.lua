--[[
  The decide call's arguments (ARGV), read here and nowhere else: decide.lua, decide_single.lua and their
  batch functions take every value through the functions below. src/store/decide-calls.ts (DECIDE_ARGV,
  DECIDE_RULE_ARGV) lays the call out; test/store/decide-layout.test.ts pins the two together through a real
  redis-server.

  ARGV[1]  self index     ARGV[2] region count n     ARGV[3] share units csv (protocol.ts shareUnits)
  ARGV[4]  max clock skew ms                          ARGV[5] rule count m
  ARGV[6]  now override in ms ('' = Redis TIME)
  then 10 values per rule, rule i's at ARGV[6 + (i - 1) * 10 + 1 .. 10]: algorithm (tb|fw|sw|sl|cc), limit,
  period ms, burst, cost, leakage budget (-1 = unbounded; protocol.ts resolveBudget), lease ttl ms, lease id,
  shadow (1|0), local lease ask (units to take beyond cost once admitted: includes/local_lease.lua; 0 = none)
  then, after the last rule (ARGV[6 + m * 10 + 1]), the gossip horizon H in ms (protocol admission-gossip.ts
  gossipHorizonMs; read by the federated paths only), and (ARGV[6 + m * 10 + 2]) peek: 1 = answer what the
  decision would be and write nothing (no count, token, lease, gossip mark or fast lane), else 0

  Every function takes `at`: argv[at + j] is the call's ARGV[j] (0 for a script's own ARGV; a batch passes
  where the call starts in its own). The positions are numbers, not named locals: a local captured by these
  functions would cost every EVAL an upvalue. Numbers are read through number_of (fmt.lua): a region's calls repeat
  the same few texts.
]]
--- @include "includes/fmt"

-- What every decide path reads first: region count, rule count, and the now override as text ('' = Redis TIME).
local function read_call(argv, at)
  return number_of(argv[at + 2]), number_of(argv[at + 5]), argv[at + 6]
end

-- What the general rule loop reads: self index, share units csv, max clock skew ms.
local function read_context(argv, at)
  return number_of(argv[at + 1]), argv[at + 3], number_of(argv[at + 4])
end

-- The gossip horizon H (ms) after the call's `rule_count` rules.
local function read_horizon(argv, at, rule_count)
  return number_of(argv[at + 6 + rule_count * 10 + 1])
end

-- Whether the call only peeks (decides, writes nothing), after the horizon.
local function read_peek(argv, at, rule_count)
  return argv[at + 6 + rule_count * 10 + 2] == '1'
end

--[[
  Rule i of the call, whose state key is `key`: the rule as the algorithms take it
  ({ key, limit, period, burst, cost, budget, lease_ttl, lease_id, lease_ask }), its algorithm code, and whether
  it is a shadow rule (counts what it would admit, never blocks).
]]
local function read_rule(argv, at, i, key)
  local base = at + 6 + (i - 1) * 10
  local rule = {
    key = key,
    limit = number_of(argv[base + 2]),
    period = number_of(argv[base + 3]),
    burst = number_of(argv[base + 4]),
    cost = number_of(argv[base + 5]),
    budget = number_of(argv[base + 6]),
    lease_ttl = number_of(argv[base + 7]),
    lease_id = argv[base + 8],
    lease_ask = number_of(argv[base + 10]),
  }
  return rule, argv[base + 1], argv[base + 9] == '1'
end

--[[
  The first rule as the one-rule paths (single_region.lua) take it: for a fixed or sliding window or a token bucket,
  its code, limit, period, burst (token bucket only), cost, the call's max clock skew (windows only) and shadow; for another algorithm its code alone. Nil when `size`, the call's argument count if known, holds no
  whole rule, or when the rule asks for a local lease (the general path takes it: local_lease.lua).
]]
local function read_first_rule(argv, at, size)
  if size ~= nil and size < 16 then return nil end
  if argv[at + 16] ~= '0' then return nil end
  local code = argv[at + 7]
  if code == 'fw' or code == 'sw' then
    return code, number_of(argv[at + 8]), number_of(argv[at + 9]), nil, number_of(argv[at + 11]), number_of(argv[at + 4]), argv[at + 15] == '1'
  end
  if code == 'tb' then
    return code, number_of(argv[at + 8]), number_of(argv[at + 9]), number_of(argv[at + 10]), number_of(argv[at + 11]), nil, argv[at + 15] == '1'
  end
  return code
end

-- Pins a call without a clock of its own (now override '') to clock()'s ms, as the text ARGV holds: a batch decides
-- all such calls at one Redis TIME read.
local function pin_clock(argv, clock)
  if argv[6] == '' then argv[6] = tostring(clock()) end
end

--[[
  The call's `rule_count` rules, read once: rule i as read_rule gives it (its key set per call by decide_rules),
  with its code and shadow flag. A batch reads them once for a run of calls with the same arguments.
]]
local function read_rules(argv, at, rule_count)
  local rules = {}
  for i = 1, rule_count do
    local rule, code, shadow = read_rule(argv, at, i, nil)
    rules[i] = { rule = rule, code = code, shadow = shadow }
  end
  return rules
end

--[[
  Every rule of the call decided by its algorithm (`algorithms`: code -> function(rule, ctx, now)), nothing
  committed yet; `rules` from read_rules, rule i's state key is KEYS[first_key - 1 + i] (set on the rule for
  this call: a batch's calls share the rule tables, one call after the other). Returns the decisions (each with
  `shadow` and `key` set) and 1 when no non-shadow rule denies, else 0.
]]
local function decide_rules(algorithms, keys, rules, first_key, ctx, now)
  local decisions = {}
  local all_allowed = 1
  for i = 1, #rules do
    local read = rules[i]
    local rule = read.rule
    rule.key = keys[first_key - 1 + i]
    local decision = algorithms[read.code](rule, ctx, now)
    decision.shadow = read.shadow
    decision.key = rule.key
    decisions[i] = decision
    if not decision.allowed and not decision.shadow then all_allowed = 0 end
  end
  return decisions, all_allowed
end
