--[[
  Current time in integer milliseconds, from the Redis server clock (never the client's).
]]
local function nowMs()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
