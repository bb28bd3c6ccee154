--[[
  Issues a one-time spawn token if the user's token rate (sliding-window log) allows it: stores the
  token's digest key with its data (metadata, lifetime, idle timeout, labels, pool, when it was issued) and its expiry
  in one step. It checks the slot's loss guard before it writes (includes/lossGuard), so that a token issued on a
  process that took over is issued after the guard's `since`, and admitted; the token carries the guard's
  stamp, which spares its admission the guard while this process runs.

  Input:
    KEYS[1] token key (hash, keyed by the SHA-256 digest of the token's secret)
    KEYS[2] the user's token-rate limiter key (sorted set, see slidingWindow-1)
    KEYS[3] the loss guard of the user's slot (hash, see includes/lossGuard)

    ARGV[1] token time to live, milliseconds (positive integer)
    ARGV[2] requested session lifetime, milliseconds ('' when the token does not ask for one)
    ARGV[3] metadata, JSON text
    ARGV[4] token limit, tokens per window (positive integer)
    ARGV[5] token window, milliseconds (positive integer)
    ARGV[6] idle timeout of the session it admits, milliseconds (integer, 0: never idle)
    ARGV[7] labels of the session it admits, JSON object of strings (checked by the caller)
    ARGV[8] pool the session it admits runs in
    ARGV[9] the loss guard's lease when no claim told the slot one, milliseconds (see includes/lossGuard)
    ARGV[10] the loss guard's slack on top of that lease in its wait after a loss, milliseconds

  Output:
    {1, expiresAt (epoch ms), limit, remaining, retryAfterMs, resetAfterMs} issued
    {-3, 0, limit, remaining, retryAfterMs, resetAfterMs} throttled: nothing written
]]
local rcall = redis.call
local tokenKey = KEYS[1]
local rateKey = KEYS[2]
local guardKey = KEYS[3]
local ttlMs = tonumber(ARGV[1])
local lifetimeMs = ARGV[2]
local metadata = ARGV[3]
local limit = tonumber(ARGV[4])
local windowMs = tonumber(ARGV[5])
local idleTimeoutMs = tonumber(ARGV[6])
local labels = ARGV[7]
local pool = ARGV[8]

--- @include "includes/nowMs"
--- @include "includes/slidingWindow"
--- @include "includes/lossGuard"

local now = nowMs()
local allowed, rate, commit = slidingWindowCheck(rateKey, limit, windowMs, now)
if not allowed then
  return { -3, 0, rate[2], rate[3], rate[4], rate[5] }
end
local guard = lossGuard(guardKey, now, tonumber(ARGV[9]), tonumber(ARGV[10]), 'token')
commit()
local expiresAt = now + ttlMs
rcall('HSET', tokenKey, 'm', metadata, 'l', lifetimeMs, 'e', expiresAt, 'i', idleTimeoutMs, 'a', now,
  'lab', labels, 'pool', pool, 'g', guard.stamp)
rcall('PEXPIRE', tokenKey, ttlMs)
return { 1, expiresAt, rate[2], rate[3], rate[4], rate[5] }
