--[[
  The owner of a running session marks it ready, with the endpoint where it can be reached (a later
  call may change the endpoint). Only the session's owner, only while it runs or stops.

  Input:
    KEYS[1] the user's session key (hash: the live session)

    ARGV[1] lease owner id
    ARGV[2] endpoint ('' for none), at most 512 characters

  Output:
    {1, changed (1|0)} marked ready
    {-7} lease_lost: not the owner any more (the session ended or moved on)
]]
local rcall = redis.call
local sessionKey = KEYS[1]
local owner = ARGV[1]
local endpoint = ARGV[2]

local s = rcall('HMGET', sessionKey, 'owner', 'ready', 'endpoint')
if s[1] ~= owner then return { -7 } end
if s[2] == '1' and (s[3] or '') == endpoint then return { 1, 0 } end
rcall('HSET', sessionKey, 'ready', '1', 'endpoint', endpoint)
return { 1, 1 }
