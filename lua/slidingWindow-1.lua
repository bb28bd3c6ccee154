--[[
  Sliding-window log rate limit on a sorted set: at most ARGV[1] calls in any ARGV[2] ms.
  Only allowed calls are logged, so the set holds at most ARGV[1] members.

  Input:
    KEYS[1] limiter key (sorted set: one member per allowed call, score = its time in epoch ms)

    ARGV[1] limit, calls per window (positive integer)
    ARGV[2] window, milliseconds (positive integer)

  Output:
    {allowed (1|0), limit, remaining, retryAfterMs, resetAfterMs}
    retryAfterMs is 0 when allowed; otherwise the time until the oldest logged call leaves the window.
]]
local rcall = redis.call
local limiterKey = KEYS[1]
local limit = tonumber(ARGV[1])
local windowMs = tonumber(ARGV[2])

--- @include "includes/nowMs"
--- @include "includes/slidingWindow"

local allowed, result, commit = slidingWindowCheck(limiterKey, limit, windowMs, nowMs())
if allowed then commit() end
return result
