--[[
  Recounts each pool's total slots from its hosts' shares (see includes/capacity): a total is kept as a
  running sum, which every script moves together with the share it changes, so it only drifts from the
  shares when Redis replays or drops some of those writes and not others (an AOF replayed twice, a
  restart that lost part of its log). The sweep runs it with each sweep (SWEEP_INTERVAL_MS, 5 s by
  default), so such a drift lasts that long at most.

  Input:
    KEYS[1] the capacity hash {total, total:<pool>, c:<workerId> = a host's share}

  Output:
    {1, totals corrected}
]]
local rcall = redis.call
local capacityKey = KEYS[1]

--- @include "includes/capacity"

local fields = rcall('HGETALL', capacityKey)
local sums, totals = {}, {}
for i = 1, #fields, 2 do
  local field, value = fields[i], fields[i + 1]
  if string.sub(field, 1, 2) == 'c:' then
    local slots, pool = string.match(value, '^(%d+)@(.+)$')
    if not slots then slots, pool = value, 'default' end
    local total = totalField(pool)
    sums[total] = (sums[total] or 0) + tonumber(slots)
  elseif field == 'total' or string.sub(field, 1, 6) == 'total:' then
    totals[field] = tonumber(value)
  end
end
local corrected = 0
for field, sum in pairs(sums) do
  if totals[field] ~= sum then
    rcall('HSET', capacityKey, field, sum)
    corrected = corrected + 1
  end
end
for field, total in pairs(totals) do
  if not sums[field] and total ~= 0 then
    rcall('HSET', capacityKey, field, 0)
    corrected = corrected + 1
  end
end
return { 1, corrected }
