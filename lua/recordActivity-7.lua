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
    KEYS[7] the session ids of the user's slot (hash: session id → user id)

    ARGV[1] user id
    ARGV[2] history length, entries kept per user
    ARGV[3] the session meant ('' for whichever is live): act only when the live session is this one
    ARGV[4] the event channel the events are published on (`<prefix>:events`: a channel, not a key)

  Output:
    {1, sessionId, state ('pending' | 'running' | 'stopping'), lastActivityAt (epoch ms, '' before it runs)}
      the user has a live session; its activity was recorded when it is running
    {-10} no_session: the user has no live session
    {-17, the live session's id ('' when there is none)} session_mismatch: ARGV[3] names a session and the
      user's live session is another one, or there is none; nothing was changed
]]
local rcall = redis.call
--- @include "includes/sessionKeys"
local K = sessionKeys(KEYS, ARGV[4])
local userId = ARGV[1]
local historyLength = tonumber(ARGV[2])
local expectedSessionId = ARGV[3]

--- @include "includes/settleForChange"

local now, state, refusal = settleForChange(K, userId, historyLength, expectedSessionId)
if refusal then return refusal end
local s = rcall('HMGET', K.session, 'id', 'act')
local lastActivity = tonumber(s[2])
if state == 'running' and lastActivity and now > lastActivity then
  lastActivity = now
  rcall('HSET', K.session, 'act', lastActivity)
end
return { 1, s[1], state, lastActivity or '' }
