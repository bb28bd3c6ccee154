--[[
  Renews a lease hash {o = owner, f = fence, d = hard deadline in epoch ms} for its owner only,
  never past its deadline. Returns code, expiresAt, deadline:
    1 renewed; -7 not the owner (or the lease expired); -8 the deadline has been reached.
]]
local function extendLease(leaseKey, owner, leaseMs, now)
  local lease = rcall('HMGET', leaseKey, 'o', 'd')
  if lease[1] ~= owner then return -7, 0, 0 end
  local deadline = tonumber(lease[2])
  if now >= deadline then return -8, now, deadline end
  local ttl = math.min(leaseMs, deadline - now)
  rcall('PEXPIRE', leaseKey, ttl)
  return 1, now + ttl, deadline
end
