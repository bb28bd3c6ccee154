--[[
  Tells a worker host to drain: it takes no new sessions and its free slots leave the capacity at once
  (its share becomes the sessions it ran at its last heartbeat; they run to their own end). The host
  learns it at its next heartbeat. Asking again changes nothing.

  Input:
    KEYS[1] the host's record key (hash {id, state, slots, busy, startedAt, seenAt, containment, pool,
            network, filesystem, cpus}; expires)
    KEYS[2] the worker registry index (sorted set: host id by when its heartbeat runs out, epoch ms)
    KEYS[3] the capacity hash {total, c:<workerId> = the host's share}
    KEYS[4] a held set to prune (sorted set: session id by when its hold runs out, epoch ms; the pool `default`'s)

    ARGV[1] worker host id

  Output:
    {1, state, slots, busy, seenAt, startedAt, containment, pool, network, filesystem, cpus} the host, now
      draining (containment: 'namespace' or 'group'; 'group' for a record written without one; pool
      'default' for one without; network, filesystem and cpus as recorded, '' for a record without them)
    {-14} no_host: no live host has this id
]]
local rcall = redis.call
local recordKey = KEYS[1]
local indexKey = KEYS[2]
local capacityKey = KEYS[3]
local heldKey = KEYS[4]
local workerId = ARGV[1]

--- @include "includes/nowMs"
--- @include "includes/capacity"

local now = nowMs()
pruneCapacity(indexKey, capacityKey, heldKey, now)
local host = rcall('HMGET', recordKey, 'id', 'slots', 'busy', 'seenAt', 'startedAt', 'containment', 'pool',
  'network', 'filesystem', 'cpus')
if not host[1] or not rcall('ZSCORE', indexKey, workerId) then return { -14 } end
rcall('HSET', recordKey, 'state', 'draining')
setContribution(capacityKey, workerId, tonumber(host[3]))
local containment = 'group'
if host[6] == 'namespace' then containment = 'namespace' end
return { 1, 'draining', host[2], host[3], host[4], host[5], containment, host[7] or 'default', host[8] or '',
  host[9] or '', host[10] or '' }
