--[[
  Worker capacity, kept in the {workers} slot beside the host registry, so one script decides it:
  - the registry index scores each host by when its heartbeat runs out (epoch ms);
  - the capacity hash holds `total`, the sum of every live host's contribution, and `c:<workerId>`,
    each host's share: its SLOTS while active, the sessions it still runs while draining;
  - the held set has one member per admitted, unended session (its id), scored by when the hold runs
    out unless renewed: the pending deadline plus a margin at admission, then the heartbeat's time to
    live while a host runs it. Free slots = total - held.
]]
local function setContribution(capacityKey, workerId, slots)
  local field = 'c:' .. workerId
  local old = tonumber(rcall('HGET', capacityKey, field) or '0')
  if slots ~= old then rcall('HINCRBY', capacityKey, 'total', slots - old) end
  if slots == 0 then rcall('HDEL', capacityKey, field) else rcall('HSET', capacityKey, field, slots) end
end

-- Hosts whose heartbeat ran out leave the capacity; holds that ran out are dropped. Bounded per call.
local function pruneCapacity(indexKey, capacityKey, heldKey, now)
  local dead = rcall('ZRANGEBYSCORE', indexKey, '-inf', now, 'LIMIT', 0, 1000)
  for i = 1, #dead do
    setContribution(capacityKey, dead[i], 0)
    rcall('ZREM', indexKey, dead[i])
  end
  rcall('ZREMRANGEBYSCORE', heldKey, '-inf', now)
end

local function capacityOf(capacityKey, heldKey)
  local total = tonumber(rcall('HGET', capacityKey, 'total') or '0')
  local held = rcall('ZCARD', heldKey)
  return total, held
end

local function eachId(list, fn)
  for id in string.gmatch(list, '[^,]+') do fn(id) end
end
