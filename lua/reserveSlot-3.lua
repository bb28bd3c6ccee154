--[[
  Holds one worker slot of the session's pool for an admitted session, in the manner of a counting
  semaphore: granted only while a slot of that pool is free (unless enforcement is off, for pools that scale on queue length), and held
  until the given time unless the host that runs it renews it with its heartbeat. A hold that nobody
  renews (the API died before the hand-off, the host died) runs out by itself.

  Input:
    KEYS[1] the worker registry index (sorted set: host id by when its heartbeat runs out, epoch ms)
    KEYS[2] the capacity hash {total, c:<workerId> = a host's share}
    KEYS[3] the pool's held set (sorted set: session id by when its hold runs out, epoch ms)

    ARGV[1] session id
    ARGV[2] how long the hold lasts unless renewed, milliseconds
    ARGV[3] 1 to refuse when no slot is free, 0 to hold one all the same
    ARGV[4] the pool

  Output:
    {1, free slots left, total slots} held (of the pool)
    {-13, total slots} no_capacity: no slot of the pool is free
]]
local rcall = redis.call
local indexKey = KEYS[1]
local capacityKey = KEYS[2]
local heldKey = KEYS[3]
local sessionId = ARGV[1]
local holdMs = tonumber(ARGV[2])
local enforce = ARGV[3] == '1'
local pool = ARGV[4]

--- @include "includes/nowMs"
--- @include "includes/capacity"

local now = nowMs()
pruneCapacity(indexKey, capacityKey, heldKey, now)
local total, held = capacityOf(capacityKey, heldKey, pool)
if enforce and held >= total and not rcall('ZSCORE', heldKey, sessionId) then return { -13, total } end
rcall('ZADD', heldKey, now + holdMs, sessionId)
return { 1, total - rcall('ZCARD', heldKey), total }
