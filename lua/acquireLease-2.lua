--[[
  Acquires a lease (SET NX PX, with a fencing token and a hard deadline) if nobody holds it.
  The fencing token comes from a counter that never expires, so it strictly increases per resource,
  across expiries and releases.

  Input:
    KEYS[1] lease key (hash {o = owner, f = fence, d = hard deadline epoch ms}; expires with the lease)
    KEYS[2] fence counter key (integer, never expires)

    ARGV[1] owner id (random, chosen by the caller)
    ARGV[2] lease time to live, milliseconds (positive integer)
    ARGV[3] maximum lifetime, milliseconds: no renewal can extend the lease past now + this

  Output:
    {1, fence, expiresAt (epoch ms), deadline (epoch ms)} acquired
    {-9, retryAfterMs} lease_held: another owner holds it for this many more ms
]]
local rcall = redis.call
local leaseKey = KEYS[1]
local fenceKey = KEYS[2]
local owner = ARGV[1]
local leaseMs = tonumber(ARGV[2])
local maxLifetimeMs = tonumber(ARGV[3])

--- @include "includes/nowMs"

-- PTTL answers -2 when there is no such key: the lease is free.
local heldMs = rcall('PTTL', leaseKey)
if heldMs ~= -2 then return { -9, math.max(heldMs, 0) } end
local now = nowMs()
local fence = rcall('INCR', fenceKey)
local deadline = now + maxLifetimeMs
local ttl = math.min(leaseMs, maxLifetimeMs)
rcall('HSET', leaseKey, 'o', owner, 'f', fence, 'd', deadline)
rcall('PEXPIRE', leaseKey, ttl)
return { 1, fence, now + ttl, deadline }
