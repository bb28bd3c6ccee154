--[[
  The live session's hash as HGETALL gives it, with `leaseExp` (when the lease runs out, epoch ms) as
  the renewals keep it: they move the lease and the user's entry in the live index (scored by that same
  instant), not the hash, whose own `leaseExp` is the claim's. Only a claimed session has one (a pending
  session's index entry is its pending deadline). The later pair wins where the reader builds a map.
]]
local function sessionFields(K, userId)
  local fields = rcall('HGETALL', K.session)
  for i = 1, #fields, 2 do
    if fields[i] == 'leaseExp' then
      local score = rcall('ZSCORE', K.liveIndex, userId)
      if score then
        fields[#fields + 1] = 'leaseExp'
        fields[#fields + 1] = score
      end
      break
    end
  end
  return fields
end
