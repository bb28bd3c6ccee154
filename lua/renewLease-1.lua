--[[
  Renews a lease for its owner only, never past the hard deadline stored with it.

  Input:
    KEYS[1] lease key (hash {o = owner, f = fence, d = hard deadline epoch ms})

    ARGV[1] owner id
    ARGV[2] lease time to live, milliseconds (positive integer)

  Output:
    {1, expiresAt (epoch ms), deadline (epoch ms), now (epoch ms)} renewed
    {-7} lease_lost: not the owner, or the lease has expired
    {-8, deadline} deadline_reached: the lease runs out at its deadline and cannot be renewed
]]
local rcall = redis.call
local leaseKey = KEYS[1]
local owner = ARGV[1]
local leaseMs = tonumber(ARGV[2])

--- @include "includes/nowMs"
--- @include "includes/extendLease"

local now = nowMs()
local code, expiresAt, deadline = extendLease(leaseKey, owner, leaseMs, now)
if code == -7 then return { -7 } end
if code == -8 then return { -8, deadline } end
return { 1, expiresAt, deadline, now }
