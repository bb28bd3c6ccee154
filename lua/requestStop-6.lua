--[[
  Asks for the user's live session to stop. A pending session that no worker host has claimed ends at
  once as `stopped` (its queued job will then start nothing); a running one moves to `stopping` and its
  worker host, which learns of it when it renews, stops the process. Asking again changes nothing.

  Input:
    KEYS[1] the user's session key (hash: the live session)
    KEYS[2] the user's session lease key (hash {o, f, d})
    KEYS[3] the user's history key (list of JSON, newest first)
    KEYS[4] the live-session index of the user's slot
    KEYS[5] the recent endings of the user's slot (list of JSON, newest first, capped)
    KEYS[6] the event stream of the user's slot (capped stream of JSON events)

    ARGV[1] user id
    ARGV[2] history length, entries kept per user

  Output:
    {1, sessionId, state after the request ('stopped' | 'stopping')} accepted
    {-10} no_session: the user has no live session
]]
local rcall = redis.call
local sessionKey = KEYS[1]
local leaseKey = KEYS[2]
local historyKey = KEYS[3]
local shardKey = KEYS[4]
local endedKey = KEYS[5]
local eventsKey = KEYS[6]
local userId = ARGV[1]
local historyLength = tonumber(ARGV[2])

--- @include "includes/nowMs"
--- @include "includes/settleSession"

local now = nowMs()
local state = settleSession(sessionKey, leaseKey, historyKey, shardKey, endedKey, eventsKey, userId, historyLength, now)
if not state then return { -10 } end
local sessionId = rcall('HGET', sessionKey, 'id')
if state == 'pending' then
  endSession(sessionKey, leaseKey, historyKey, shardKey, endedKey, eventsKey, userId, historyLength, 'stopped', nil, now)
  return { 1, sessionId, 'stopped' }
end
if state == 'stopping' then return { 1, sessionId, 'stopping' } end
rcall('HSET', sessionKey, 'state', 'stopping', 'stop', 'requested')
local s = rcall('HMGET', sessionKey, 'fence', 'worker')
emitEvent(eventsKey, { type = 'stopping', sessionId = sessionId, userId = userId, fence = tonumber(s[1]),
  workerId = s[2] }, now)
return { 1, sessionId, 'stopping' }
