--[[
  The owner of a running session renews its lease (never past the lease's hard deadline) and learns
  whether a stop was requested and the session's current deadlines (a lifetime change through the API
  moves them). Called about once a second by the worker host.

  Input:
    KEYS[1] the user's session lease key (hash {o = owner, f = fence, d = hard deadline epoch ms})
    KEYS[2] the user's session key (hash: the live session)
    KEYS[3] the live-session index of the user's slot

    ARGV[1] lease owner id
    ARGV[2] lease time to live, milliseconds
    ARGV[3] user id

  Output:
    {1, leaseExpiresAt (epoch ms), stopRequested (1|0), now (epoch ms), hardDeadline (epoch ms),
      deadline (epoch ms)} renewed: the lease holds until leaseExpiresAt, never past hardDeadline; the
      session's lifetime runs out at deadline
    {-7} lease_lost: not the owner, or the lease expired (the session must stop at once)
    {-8, hardDeadline} deadline_reached: the lease runs out at its hard deadline and cannot be renewed
]]
local rcall = redis.call
local leaseKey = KEYS[1]
local sessionKey = KEYS[2]
local shardKey = KEYS[3]
local owner = ARGV[1]
local leaseMs = tonumber(ARGV[2])
local userId = ARGV[3]

--- @include "includes/nowMs"
--- @include "includes/extendLease"

local now = nowMs()
if rcall('HGET', sessionKey, 'owner') ~= owner then return { -7 } end
local code, expiresAt, hardDeadline = extendLease(leaseKey, owner, leaseMs, now)
if code == -7 then return { -7 } end
if code == -8 then return { -8, hardDeadline } end
rcall('HSET', sessionKey, 'leaseExp', expiresAt)
rcall('ZADD', shardKey, expiresAt, userId)
local s = rcall('HMGET', sessionKey, 'stop', 'deadline')
local stop = s[1] and 1 or 0
return { 1, expiresAt, stop, now, hardDeadline, tonumber(s[2]) }
