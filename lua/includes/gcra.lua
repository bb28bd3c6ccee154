--[[
  Generic cell rate algorithm (as in redis-cell), split in a side-effect-free check and a commit,
  so that a caller can check several conditions before it writes anything.
  The key holds the theoretical arrival time (TAT) in epoch milliseconds and expires when it is in the past.
  A burst of `burst` calls is allowed at once, then one per `intervalMs`.
]]
--- @include "rateResult"

-- Returns allowed (boolean), newTat, rate reply. Writes nothing.
local function gcraCheck(key, intervalMs, burst, now)
  local tat = tonumber(rcall('GET', key))
  if tat == nil or tat < now then tat = now end
  local newTat = tat + intervalMs
  local allowAt = newTat - burst * intervalMs
  if now < allowAt then
    return false, tat, rateResult(false, burst, 0, allowAt - now, tat - now)
  end
  local remaining = math.floor((now - allowAt) / intervalMs)
  return true, newTat, rateResult(true, burst, remaining, 0, newTat - now)
end

local function gcraCommit(key, newTat, now)
  rcall('SET', key, newTat, 'PX', newTat - now)
end
