--[[
  A worker host asks which Redis process serves a slot where it runs sessions under its host lease, every
  third of the lease (one slot per Redis master): the session's records are kept by that process, and a process replaced since the session
  last heard from it (a restart, a failover) may have lost them. The slot's loss guard answers, as it
  does for every admission and claim (a replaced process starts the guard's wait here too).

  Input:
    KEYS[1] the loss guard of the slot (hash, see includes/lossGuard)

    ARGV[1] the loss guard's lease when no claim told the slot one, milliseconds (see includes/lossGuard)
    ARGV[2] the loss guard's slack on top of that lease in its wait after a loss, milliseconds

  Output:
    {1, run_id} the run_id of the Redis process serving the slot
]]
local rcall = redis.call
local guardKey = KEYS[1]

--- @include "includes/nowMs"
--- @include "includes/lossGuard"

return { 1, lossGuard(guardKey, nowMs(), tonumber(ARGV[1]), tonumber(ARGV[2])).run }
