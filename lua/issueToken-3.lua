--[[
  Issues a one-time spawn token if the user's token rate (sliding-window log) allows it: stores the
  token's digest key with its data (metadata, lifetime, idle timeout) and its expiry in one step.

  Input:
    KEYS[1] token key (hash, keyed by the SHA-256 digest of the token's secret)
    KEYS[2] the user's token-rate limiter key (sorted set, see slidingWindow-1)

    ARGV[1] token time to live, milliseconds (positive integer)
    ARGV[2] requested session lifetime, milliseconds ('' when the token does not ask for one)
    ARGV[3] metadata, JSON text
    ARGV[4] token limit, tokens per window (positive integer)
    ARGV[5] token window, milliseconds (positive integer)
    ARGV[6] idle timeout of the session it admits, milliseconds (integer, 0: never idle)

  Output:
    {1, expiresAt (epoch ms), limit, remaining, retryAfterMs, resetAfterMs} issued
    {-3, 0, limit, remaining, retryAfterMs, resetAfterMs} throttled: nothing written
]]
local rcall = redis.call
local tokenKey = KEYS[1]
local rateKey = KEYS[2]
local ttlMs = tonumber(ARGV[1])
local lifetimeMs = ARGV[2]
local metadata = ARGV[3]
local limit = tonumber(ARGV[4])
local windowMs = tonumber(ARGV[5])
local idleTimeoutMs = tonumber(ARGV[6])

--- @include "includes/nowMs"
--- @include "includes/slidingWindow"

local now = nowMs()
local allowed, rate, commit = slidingWindowCheck(rateKey, limit, windowMs, now)
if not allowed then
  return { -3, 0, rate[2], rate[3], rate[4], rate[5] }
end
commit()
local expiresAt = now + ttlMs
rcall('HSET', tokenKey, 'm', metadata, 'l', lifetimeMs, 'e', expiresAt, 'i', idleTimeoutMs)
rcall('PEXPIRE', tokenKey, ttlMs)
return { 1, expiresAt, rate[2], rate[3], rate[4], rate[5] }
