--[[
  A number as the state stores it. %.17g reads back as the very same double (Redis would turn a Lua number into a
  string with %.14g, and fractional tokens must read back exactly). A whole number below 2^53 in magnitude other than
  0 (counts, clocks, ids, share units, a single region's bucket time in µs: 16 digits) is written with %d: the same
  text %.17g gives it (every digit of a whole number below 10^17; checked on 400,000 of them), at half the cost (glibc
  formats a double's 17 digits in multi-precision arithmetic: 5,900 instructions against 2,800 for a 16-digit one).
  0 keeps %.17g, which tells -0 from 0.
]]
local function fmt(value)
  if value % 1 == 0 and value > -9007199254740992 and value < 9007199254740992 and value ~= 0 then
    return string.format('%d', value)
  end
  return string.format('%.17g', value)
end

--[[
  A function of a number that keeps the text `text_of` gave the value it was last given (formatting a number is not
  cheap): the calls of a batch store and answer at one clock, and every new bucket or window of a rule stores the
  same tokens or counts. 0 is formatted every time: == cannot tell -0 from 0, fmt does.
]]
local function last_text(text_of)
  local last, text
  return function(value)
    if value ~= last or value == 0 then last, text = value, text_of(value) end
    return text
  end
end

--[[
  A conversion whose results are kept: kept_values(convert) answers `kept`, where kept.values[x] is convert(x) for the
  values converted lately and kept.of(x) converts x and keeps the result (a caller reads kept.values first, so a kept
  result costs a table lookup). A Functions library keeps them between calls, at most 4,096 (then it starts over); a
  nil or NaN value, and a nil result, are converted but not kept (a table key cannot be nil or NaN).
]]
local function kept_values(convert)
  local kept = { values = {}, count = 0 }
  function kept.of(value)
    local result = convert(value)
    if value ~= nil and value == value and result ~= nil then
      if kept.count >= 4096 then kept.values, kept.count = {}, 0 end
      kept.values[value] = result
      kept.count = kept.count + 1
    end
    return result
  end
  return kept
end

--[[
  tonumber of a stored text, kept (fmt's inverse, for the hashes' fields and the calls' arguments): the same texts come
  back decision after decision and key after key (a share's units, an epoch id, a count, a clock, a limit), and a table
  lookup costs a tenth of strtod's parse (1,500 to 3,000 instructions a text in Redis's Lua; a loud bucket decision
  parses about twenty). nil for an absent field (nil or false) and for a text that is no number; otherwise the very
  number tonumber gives (its own parse, kept).
]]
local number_of
do
  -- (tonumber is read when a text is converted: a library's main chunk cannot read the globals while it loads.)
  local numbers = kept_values(function(text) return tonumber(text) end)
  number_of = function(text)
    if not text then return nil end
    return numbers.values[text] or numbers.of(text)
  end
end
