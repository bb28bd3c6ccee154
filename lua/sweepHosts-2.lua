--[[
  The sweep finds host leases that ran out (see heartbeatWorker): their hosts stopped every session
  registered under them by then, on their own clocks, and never renew them again, so those sessions can
  be ended as `lost` (sweepSession, with the session id) and the lease forgotten (forgetHost). Nothing is
  found while the {workers} slot's loss guard waits after Redis may have lost writes: a lease renewed in
  the lost writes may look run out, and its host renews it again within the wait.

  Input:
    KEYS[1] the host leases (sorted set: lease token by when the lease runs out, epoch ms)
    KEYS[2] the loss guard of the {workers} slot (hash, see includes/lossGuard)

    ARGV[1] at most this many leases
    ARGV[2] the loss guard's lease when no claim told the slot one, milliseconds (see includes/lossGuard)
    ARGV[3] the loss guard's slack on top of that lease in its wait after a loss, milliseconds

  Output:
    {1, token...} the leases that ran out (none while the guard waits)
]]
local rcall = redis.call
local leasesKey = KEYS[1]
local limit = tonumber(ARGV[1])
local guardLeaseMs, guardSlackMs = tonumber(ARGV[2]), tonumber(ARGV[3])

--- @include "includes/nowMs"
--- @include "includes/lossGuard"

local now = nowMs()
local tokens = rcall('ZRANGEBYSCORE', leasesKey, '-inf', now, 'LIMIT', 0, limit)
-- The guard only when there is something to answer: most looks find nothing, for three commands.
if #tokens == 0 or now < lossGuard(KEYS[2], now, guardLeaseMs, guardSlackMs).untilMs then return { 1 } end
return { 1, unpack(tokens) }
