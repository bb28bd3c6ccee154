--[[
  The sweep forgets a host lease that ran out once it has ended the sessions registered under it
  (sweepHosts): the lease and its registrations go. A lease renewed meanwhile (it cannot be: one that ran
  out is never renewed) is left as it is.

  Input:
    KEYS[1] the host leases (sorted set: lease token by when the lease runs out, epoch ms)
    KEYS[2] the sessions registered under the lease (hash: session id → user id)

    ARGV[1] the lease token

  Output:
    {1} forgotten
    {-9} lease_held: not forgotten, the lease holds
]]
local rcall = redis.call

--- @include "includes/nowMs"

local expiresAt = tonumber(rcall('ZSCORE', KEYS[1], ARGV[1]))
if expiresAt and expiresAt > nowMs() then return { -9 } end
rcall('ZREM', KEYS[1], ARGV[1])
rcall('DEL', KEYS[2])
return { 1 }
