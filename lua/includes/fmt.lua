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
  tonumber of a stored text, kept (fmt's inverse, for the hashes' fields): the same texts come back decision after
  decision and key after key (a share's units, an epoch id, a count, a clock), and a table lookup costs a tenth of
  strtod's parse (1,500 to 3,000 instructions a text in Redis's Lua; a loud bucket decision parses about twenty).
  nil for an absent field (nil or false) and for a text that is no number; otherwise the very number tonumber gives
  (its own parse, kept). A Functions library keeps at most NUMBERS_KEPT texts between calls, then starts over.
]]
local number_of
do
  local NUMBERS_KEPT = 4096
  local numbers, count = {}, 0
  number_of = function(text)
    if not text then return nil end
    local number = numbers[text]
    if number == nil then
      number = tonumber(text)
      if number ~= nil then
        if count >= NUMBERS_KEPT then numbers, count = {}, 0 end
        numbers[text] = number
        count = count + 1
      end
    end
    return number
  end
end
