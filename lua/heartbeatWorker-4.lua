--[[
  A worker host publishes its heartbeat: its record and its share of the capacity last until the
  heartbeat's time to live runs out unless renewed; the holds of the sessions it runs are renewed with
  it, and those of the sessions it ended are given back. A host told to drain stays draining until it
  withdraws (a new process under the same id, with another start time, starts active).

  Input:
    KEYS[1] the host's record key (hash {id, state, slots, busy, startedAt, seenAt, containment, pool}; expires)
    KEYS[2] the worker registry index (sorted set: host id by when its heartbeat runs out, epoch ms)
    KEYS[3] the capacity hash {total, c:<workerId> = the host's share}
    KEYS[4] the held set of the host's pool (sorted set: session id by when its hold runs out, epoch ms)

    ARGV[1] worker host id
    ARGV[2] slots, sessions the host runs at once
    ARGV[3] slots in use
    ARGV[4] when the host started, epoch ms
    ARGV[5] record time to live, milliseconds
    ARGV[6] 1 to publish, 0 to withdraw the host (clean shutdown)
    ARGV[7] the sessions the host runs (ids, comma-separated; may be empty)
    ARGV[8] the sessions it ended since its last heartbeat (ids, comma-separated; may be empty)
    ARGV[9] how the host keeps a session's processes inside it: 'namespace' or 'group' (anything else,
            e.g. '', is recorded as 'group')
    ARGV[10] the pool the host serves

  Output:
    {1, now (epoch ms), state ('active' | 'draining' | 'withdrawn')} published or withdrawn
]]
local rcall = redis.call
local recordKey = KEYS[1]
local indexKey = KEYS[2]
local capacityKey = KEYS[3]
local heldKey = KEYS[4]
local workerId = ARGV[1]
local slots = tonumber(ARGV[2])
local busy = tonumber(ARGV[3])
local startedAt = ARGV[4]
local ttlMs = tonumber(ARGV[5])
local publish = ARGV[6] == '1'
local running = ARGV[7]
local ended = ARGV[8]
local containment = ARGV[9]
if containment ~= 'namespace' then containment = 'group' end
local pool = ARGV[10]

--- @include "includes/nowMs"
--- @include "includes/capacity"

local now = nowMs()
pruneCapacity(indexKey, capacityKey, heldKey, now)
removeAll(heldKey, ended)
if not publish then
  removeAll(heldKey, running)
  setContribution(capacityKey, workerId, 0, pool)
  rcall('DEL', recordKey)
  rcall('ZREM', indexKey, workerId)
  return { 1, now, 'withdrawn' }
end
local previous = rcall('HMGET', recordKey, 'state', 'startedAt')
local state = 'active'
if previous[1] == 'draining' and previous[2] == startedAt then state = 'draining' end
rcall('HSET', recordKey, 'id', workerId, 'state', state, 'slots', slots, 'busy', busy, 'startedAt', startedAt,
  'seenAt', now, 'containment', containment, 'pool', pool)
rcall('PEXPIRE', recordKey, ttlMs)
rcall('ZADD', indexKey, now + ttlMs, workerId)
scoreAll(heldKey, now + ttlMs, running)
if state == 'active' then
  setContribution(capacityKey, workerId, slots, pool)
else
  setContribution(capacityKey, workerId, busy, pool)
end
return { 1, now, state }
