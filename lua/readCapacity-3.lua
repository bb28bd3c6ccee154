--[[
  Reads a pool's worker capacity, first letting hosts whose heartbeat ran out, and the pool's holds
  nobody renewed, go.

  Input:
    KEYS[1] the worker registry index (sorted set: host id by when its heartbeat runs out, epoch ms)
    KEYS[2] the capacity hash {total, c:<workerId> = a host's share}
    KEYS[3] the pool's held set (sorted set: session id by when its hold runs out, epoch ms)

    ARGV[1] the pool

  Output:
    {1, total slots, held slots, now (epoch ms)}
]]
local rcall = redis.call
local indexKey = KEYS[1]
local capacityKey = KEYS[2]
local heldKey = KEYS[3]
local pool = ARGV[1]

--- @include "includes/nowMs"
--- @include "includes/capacity"

local now = nowMs()
pruneCapacity(indexKey, capacityKey, heldKey, now)
local total, held = capacityOf(capacityKey, heldKey, pool)
return { 1, total, held, now }
