--[[
  Worker capacity, per pool, kept in the {workers} slot beside the host registry, so one script decides it:
  - the registry index scores each host by when its heartbeat runs out (epoch ms);
  - the capacity hash holds each pool's total, the sum of the contributions of its live hosts (field
    `total` for the pool `default`, `total:<pool>` for another, so a deployment from before pools keeps
    its numbers), and `c:<workerId>`, each host's share: its SLOTS while active, the sessions it still
    runs while draining, written `<n>` for a host of `default` and `<n>@<pool>` for another;
  - each pool's held set has one member per admitted, unended session of the pool (its id), scored by
    when the hold runs out unless renewed: the pending deadline plus a margin at admission, then the
    heartbeat's time to live while a host runs it (`held` for `default`, `held:<pool>` for another).
  Free slots of a pool = its total - its held.
]]
local function totalField(pool)
  if pool == 'default' then return 'total' end
  return 'total:' .. pool
end

-- A host's share as kept: its slots and its pool.
local function shareOf(capacityKey, workerId)
  local share = rcall('HGET', capacityKey, 'c:' .. workerId)
  if not share then return 0, 'default' end
  local slots, pool = string.match(share, '^(%d+)@(.+)$')
  if slots then return tonumber(slots), pool end
  return tonumber(share), 'default'
end

-- Sets a host's share to `slots` of `pool` (nil: the pool it had), moving its pool's total with it.
local function setContribution(capacityKey, workerId, slots, pool)
  local old, oldPool = shareOf(capacityKey, workerId)
  pool = pool or oldPool
  if pool ~= oldPool then
    -- The same host id, now in another pool (a restart with another POOL): its old share leaves.
    if old ~= 0 then rcall('HINCRBY', capacityKey, totalField(oldPool), -old) end
    old = 0
  end
  if slots ~= old then rcall('HINCRBY', capacityKey, totalField(pool), slots - old) end
  local field = 'c:' .. workerId
  if slots == 0 then
    rcall('HDEL', capacityKey, field)
  elseif pool == 'default' then
    rcall('HSET', capacityKey, field, slots)
  else
    rcall('HSET', capacityKey, field, slots .. '@' .. pool)
  end
end

-- Hosts whose heartbeat ran out leave the capacity (of whichever pool); holds of `heldKey`'s pool that
-- ran out are dropped. Bounded per call.
local function pruneCapacity(indexKey, capacityKey, heldKey, now)
  local dead = rcall('ZRANGEBYSCORE', indexKey, '-inf', now, 'LIMIT', 0, 1000)
  for i = 1, #dead do
    setContribution(capacityKey, dead[i], 0)
    rcall('ZREM', indexKey, dead[i])
  end
  rcall('ZREMRANGEBYSCORE', heldKey, '-inf', now)
end

-- The total and held slots of `pool`, whose held set is `heldKey`.
local function capacityOf(capacityKey, heldKey, pool)
  local total = tonumber(rcall('HGET', capacityKey, totalField(pool)) or '0')
  local held = rcall('ZCARD', heldKey)
  return total, held
end

-- Scores every id of a comma-separated list in a sorted set (ZADD), or removes them (ZREM), a few
-- hundred members per command rather than one command per member: a host's heartbeat renews the holds
-- of all its sessions for a command or so, whatever their number.
local function eachChunk(list, fn)
  local chunk = {}
  for id in string.gmatch(list, '[^,]+') do
    chunk[#chunk + 1] = id
    if #chunk == 500 then fn(chunk); chunk = {} end
  end
  if #chunk > 0 then fn(chunk) end
end

local function scoreAll(key, score, list)
  eachChunk(list, function(ids)
    local args = {}
    for i, id in ipairs(ids) do args[2 * i - 1] = score; args[2 * i] = id end
    rcall('ZADD', key, unpack(args))
  end)
end

local function removeAll(key, list)
  eachChunk(list, function(ids) rcall('ZREM', key, unpack(ids)) end)
end
