--- @include "includes/fmt"

--[[
  A number as fmt stores it, in the fewest significant digits (15, 16 or 17) that read back as the very same double:
  for cells written rarely whose values are often short decimals that %.17g spells out in full (a token bucket's
  moved tokens y, `a` cells: 333.333 is stored as "333.333", not "333.33300000000003", 11 B less a field). tonumber
  (strtod, correctly rounded) of the text is the value, as with fmt; two or three formats instead of one.
]]
local function fmt_short(value)
  if value % 1 == 0 then return fmt(value) end
  local text = string.format('%.15g', value)
  if tonumber(text) == value then return text end
  text = string.format('%.16g', value)
  if tonumber(text) == value then return text end
  return string.format('%.17g', value)
end
