--[[
  Records activity of the user's running session (the service saw its user working): its last activity
  becomes now (never earlier than it was), which puts off its idle stop. A pending or stopping session
  is left as it is (its idle clock starts when it runs; a stop is under way). An overdue session is
  first ended as `lost`, so activity is never recorded for a session whose host is gone.

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
    {1, sessionId, state ('pending' | 'running' | 'stopping'), lastActivityAt (epoch ms, '' before it runs)}
      the user has a live session; its activity was recorded when it is running
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
local s = rcall('HMGET', sessionKey, 'id', 'act')
local lastActivity = tonumber(s[2])
if state == 'running' and lastActivity and now > lastActivity then
  lastActivity = now
  rcall('HSET', sessionKey, 'act', lastActivity)
end
return { 1, s[1], state, lastActivity or '' }
