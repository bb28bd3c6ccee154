--[[
  The live session's hash as HGETALL gives it, with `leaseExp` (when the lease runs out, epoch ms) read
  from the lease itself: renewals move the lease and the live index, not the hash, so the hash's own
  `leaseExp` is the claim's. The later pair wins where the reader builds a map.
]]
local function sessionFields(K, now)
  local fields = rcall('HGETALL', K.session)
  local pttl = rcall('PTTL', K.lease)
  if pttl > 0 then
    fields[#fields + 1] = 'leaseExp'
    fields[#fields + 1] = tostring(now + pttl)
  end
  return fields
end
