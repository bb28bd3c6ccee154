--[[
  Asks for the user's live session to stop. A pending session that no worker host has claimed ends at
  once as `stopped` (its queued job will then start nothing); a running one moves to `stopping` and its
  worker host, told on its channel (it renews the session at once, and learns of the stop), stops the
  process. Asking again changes nothing.

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
    ARGV[5] the start of every worker host's channel (`<prefix>:host:`, then the host's id), for its nudge

  Output:
    {1, sessionId, state after the request ('stopped' | 'stopping'), pool, worker host id (when stopping)}
      accepted
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
local hostChannels = ARGV[5]

--- @include "includes/settleForChange"

local now, state, refusal = settleForChange(K, userId, historyLength, expectedSessionId)
if refusal then return refusal end
local idAndPool = rcall('HMGET', K.session, 'id', 'pool')
local sessionId, pool = idAndPool[1], idAndPool[2] or 'default'
if state == 'pending' then
  endSession(K, userId, historyLength, 'stopped', nil, now)
  return { 1, sessionId, 'stopped', pool }
end
if state == 'stopping' then return { 1, sessionId, 'stopping', pool, rcall('HGET', K.session, 'worker') or '' } end
rcall('HSET', K.session, 'state', 'stopping', 'stop', 'requested')
local s = rcall('HMGET', K.session, 'fence', 'worker', 'lab', 'pool')
emitEvent(K.events, K.channel, { type = 'stopping', sessionId = sessionId, userId = userId,
  fence = tonumber(s[1]), workerId = s[2], pool = s[4] or 'default' }, now, s[3] or '{}')
nudgeHost(hostChannels, s[2], userId)
return { 1, sessionId, 'stopping', pool, s[2] or '' }
