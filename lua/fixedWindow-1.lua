--[[
  Fixed-window counter (the INCR pattern done right): the window opens at the first call, which sets
  the counter and its expiry in one write (SET PX), so later calls never push it out; the check and the
  increment are one atomic step, and a rejected call writes nothing. Commands: 2 for a window's first
  call (GET, SET), 3 for a later allowed one (GET, INCR, PTTL), 2 for a rejected one (GET, PTTL).

  Input:
    KEYS[1] limiter key (string: calls counted in the current window; expires with the window)

    ARGV[1] limit, calls per window (positive integer)
    ARGV[2] window, milliseconds (positive integer)

  Output:
    {allowed (1|0), limit, remaining, retryAfterMs, resetAfterMs}
    retryAfterMs is 0 when allowed; otherwise the time until the window has closed.
]]
local rcall = redis.call
local limiterKey = KEYS[1]
-- ARGV[2] goes to SET and PEXPIRE as the string it came as: a Lua number would be formatted back.

local current = rcall('GET', limiterKey)
if not current then
  -- The window's first call: open it with its expiry in one write (no PTTL needed: it is the window).
  rcall('SET', limiterKey, '1', 'PX', ARGV[2])
  local limit = tonumber(ARGV[1])
  return { 1, limit, limit - 1, 0, tonumber(ARGV[2]) + 1 }
end
local limit = tonumber(ARGV[1])
local count = tonumber(current)
if count >= limit then
  local ttl = rcall('PTTL', limiterKey)
  if ttl < 0 then
    -- A counter without an expiry would block forever: give it a full window.
    rcall('PEXPIRE', limiterKey, ARGV[2])
    ttl = tonumber(ARGV[2])
  end
  -- A key expires once the clock is past its expiry time, hence the extra millisecond.
  return { 0, limit, 0, ttl + 1, ttl + 1 }
end
count = rcall('INCR', limiterKey)
local ttl = rcall('PTTL', limiterKey)
if ttl < 0 then
  rcall('PEXPIRE', limiterKey, ARGV[2])
  ttl = tonumber(ARGV[2])
end
return { 1, limit, limit - count, 0, ttl + 1 }
