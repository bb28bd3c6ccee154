--[[
  GCRA rate limit check (as in redis-cell): a burst of ARGV[2] calls, then one per ARGV[1] ms.
  A rejected call writes nothing, so it does not push the next allowed time further out.

  Input:
    KEYS[1] limiter key (string: theoretical arrival time, epoch ms; expires when in the past)

    ARGV[1] emission interval, milliseconds (positive integer)
    ARGV[2] burst, calls allowed at once (positive integer)

  Output:
    {allowed (1|0), limit (= burst), remaining, retryAfterMs, resetAfterMs}
    retryAfterMs is 0 when allowed; otherwise a call made that many ms later is allowed.
]]
local rcall = redis.call
local limiterKey = KEYS[1]
local intervalMs = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])

--- @include "includes/nowMs"
--- @include "includes/gcra"

local now = nowMs()
local allowed, newTat, result = gcraCheck(limiterKey, intervalMs, burst, now)
if allowed then gcraCommit(limiterKey, newTat, now) end
return result
