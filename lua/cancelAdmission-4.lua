--[[
  Rolls back an admission whose session could not be handed on (e.g. the enqueue failed): the token
  becomes usable again for the rest of its life, the spawn throttle returns to where it was, and the
  pending session disappears without a trace in the history. The fence stays used: fences only grow.

  Input:
    KEYS[1] the user's session key (hash: the live session)
    KEYS[2] token key the session was admitted with
    KEYS[3] the user's spawn throttle key
    KEYS[4] the live-session index shard of the user's slot

    ARGV[1] session id of the admission to roll back
    ARGV[2] user id

  Output:
    {1, tokenRestored (1|0)} rolled back; 0 when the token had expired meanwhile
    {-4} stale: no pending session with this id (claimed, ended or never admitted)
]]
local rcall = redis.call
local sessionKey = KEYS[1]
local tokenKey = KEYS[2]
local throttleKey = KEYS[3]
local shardKey = KEYS[4]
local sessionId = ARGV[1]
local userId = ARGV[2]

--- @include "includes/nowMs"

local s = rcall('HMGET', sessionKey, 'id', 'state', 'meta', 'tokL', 'tokE', 'ptat')
if s[1] ~= sessionId or s[2] ~= 'pending' then return { -4 } end

local now = nowMs()
local restored = 0
local tokenExpiresAt = tonumber(s[5])
if tokenExpiresAt > now then
  rcall('HSET', tokenKey, 'm', s[3], 'l', s[4], 'e', tokenExpiresAt)
  rcall('PEXPIRE', tokenKey, tokenExpiresAt - now)
  restored = 1
end
local previousTat = tonumber(s[6])
if previousTat and previousTat > now then
  rcall('SET', throttleKey, previousTat, 'PX', previousTat - now)
else
  rcall('DEL', throttleKey)
end
rcall('DEL', sessionKey)
rcall('ZREM', shardKey, userId)
return { 1, restored }
