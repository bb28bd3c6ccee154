--[[
  GCRA rate limit check (as in redis-cell): a burst of ARGV[2] calls, then one per ARGV[1] ms.
  A rejected call writes nothing, so it does not push the next allowed time further out. Commands:
  PTTL, then PEXPIRE (SET PX for a key not there) when allowed; no TIME: the key's time to live is
  the state.

  Input:
    KEYS[1] limiter key (string; its expiry is the theoretical arrival time: see includes/gcra)

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

--- @include "includes/gcra"

local allowed, tat, newTat, remaining, retryAfterMs = gcraCheck(limiterKey, intervalMs, burst)
if not allowed then return { 0, burst, 0, retryAfterMs, tat } end
gcraCommit(limiterKey, tat, newTat)
return { 1, burst, remaining, 0, newTat }
