--[[
  A worker host publishes its heartbeat: its record expires unless renewed, and the registry index
  forgets hosts whose heartbeat is older than the record's time to live.

  Input:
    KEYS[1] the host's record key (hash {id, slots, busy, startedAt, seenAt}; expires)
    KEYS[2] the worker registry index (sorted set: host id by last heartbeat, epoch ms)

    ARGV[1] worker host id
    ARGV[2] slots, sessions the host runs at once
    ARGV[3] slots in use
    ARGV[4] when the host started, epoch ms
    ARGV[5] record time to live, milliseconds
    ARGV[6] 1 to publish, 0 to withdraw the host (clean shutdown)

  Output:
    {1, now (epoch ms)} published or withdrawn
]]
local rcall = redis.call
local recordKey = KEYS[1]
local indexKey = KEYS[2]
local workerId = ARGV[1]
local slots = ARGV[2]
local busy = ARGV[3]
local startedAt = ARGV[4]
local ttlMs = tonumber(ARGV[5])
local publish = ARGV[6] == '1'

--- @include "includes/nowMs"

local now = nowMs()
if not publish then
  rcall('DEL', recordKey)
  rcall('ZREM', indexKey, workerId)
  return { 1, now }
end
rcall('HSET', recordKey, 'id', workerId, 'slots', slots, 'busy', busy, 'startedAt', startedAt, 'seenAt', now)
rcall('PEXPIRE', recordKey, ttlMs)
rcall('ZADD', indexKey, now, workerId)
rcall('ZREMRANGEBYSCORE', indexKey, '-inf', now - ttlMs)
return { 1, now }
