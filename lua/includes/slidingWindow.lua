--[[
  Sliding-window log on a sorted set: one member per allowed call, scored with its time in epoch
  milliseconds. A rejected call adds nothing, so the set never holds more than `limit` members.
]]
--- @include "rateResult"

-- Returns allowed (boolean), rate reply, and a commit function (nil when rejected). Trims old entries.
local function slidingWindowCheck(key, limit, windowMs, now)
  rcall('ZREMRANGEBYSCORE', key, '-inf', now - windowMs)
  local count = rcall('ZCARD', key)
  if count >= limit then
    local oldest = rcall('ZRANGE', key, 0, 0, 'WITHSCORES')
    local retry = tonumber(oldest[2]) + windowMs - now
    local newest = rcall('ZRANGE', key, -1, -1, 'WITHSCORES')
    return false, rateResult(false, limit, 0, retry, tonumber(newest[2]) + windowMs - now), nil
  end
  local commit = function()
    local member = now .. '-' .. count
    local n = 0
    -- A member is unique unless the server clock stepped back; then add a suffix until it is.
    while rcall('ZADD', key, 'NX', now, member) == 0 do
      n = n + 1
      member = now .. '-' .. count .. '-' .. n
    end
    rcall('PEXPIRE', key, windowMs)
  end
  return true, rateResult(true, limit, limit - count - 1, 0, windowMs), commit
end
