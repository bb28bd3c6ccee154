--[[
  The reply shared by every limiter: {allowed (0|1), limit, remaining, retryAfterMs, resetAfterMs}.
]]
local function rateResult(allowed, limit, remaining, retryAfterMs, resetAfterMs)
  if remaining < 0 then remaining = 0 end
  return { allowed and 1 or 0, limit, remaining, retryAfterMs, resetAfterMs }
end
