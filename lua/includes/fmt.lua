--[[
  A number as the state stores it. %.17g reads back as the very same double (Redis would turn a Lua number into a
  string with %.14g, and fractional tokens must read back exactly). A whole number of at most 15 digits other than 0
  (counts, clocks, ids, share units) is written with %d: the same text %.17g gives it, at a fraction of the cost
  (glibc formats a double's 17 digits in multi-precision arithmetic: about a microsecond each). 0 keeps %.17g, which
  tells -0 from 0.
]]
local function fmt(value)
  if value % 1 == 0 and value > -1e15 and value < 1e15 and value ~= 0 then return string.format('%d', value) end
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
