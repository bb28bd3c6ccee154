--[[
  Releases a lease by compare-and-delete: only its owner can delete it.

  Input:
    KEYS[1] lease key (hash {o = owner, f = fence, d = hard deadline epoch ms})

    ARGV[1] owner id

  Output:
    {1} released
    {-7} lease_lost: not the owner, or the lease had already expired
]]
local rcall = redis.call
local leaseKey = KEYS[1]
local owner = ARGV[1]

if rcall('HGET', leaseKey, 'o') ~= owner then return { -7 } end
rcall('DEL', leaseKey)
return { 1 }
