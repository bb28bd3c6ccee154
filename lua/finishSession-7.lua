--[[
  The owner of a session records its terminal state, exit code and, where it knows one, the reason
  (`out_of_memory`: `failed` because its memory cap killed it; `idle`: `stopped` because it showed no
  activity for its idle timeout): the session moves to the history, its
  lease is released and its index entry removed; the reason is in the history entry, the recent endings
  and the terminal event.
  A session Redis no longer knows as this owner's, whose records it lost (it restarted or failed over
  without them: the live record is gone, or still `pending` because the claim was lost), ends `lost`
  with reason `state_lost`, whatever the host says, unless its history already has it (the sweeper
  ended it while its host was away): every session reaches exactly one terminal state.

  Input:
    KEYS[1] the user's session key (hash: the live session)
    KEYS[2] the user's session lease key (hash {o, f, d})
    KEYS[3] the user's history key (list of JSON, newest first)
    KEYS[4] the live-session index of the user's slot
    KEYS[5] the recent endings of the user's slot (list of JSON, newest first, capped)
    KEYS[6] the event stream of the user's slot (capped stream of JSON events)
    KEYS[7] the session ids of the user's slot (hash: session id → user id)

    ARGV[1] session id
    ARGV[2] lease owner id
    ARGV[3] terminal state: completed | failed | expired | stopped | lost
    ARGV[4] exit code of the process ('' when there is none)
    ARGV[5] user id
    ARGV[6] history length, entries kept per user
    ARGV[7] why it ended: out_of_memory (only with failed), idle (only with stopped), or '' for no reason
    ARGV[8] the session's fence (from its claim)
    ARGV[9] when the session started, epoch ms (from its claim)
    ARGV[10] the worker host id
    ARGV[11] the session's labels, JSON (from its claim; for a session whose records were lost)
    ARGV[12] the session's pool (from its claim; likewise)
    ARGV[13] the event channel the events are published on (`<prefix>:events`: a channel, not a key)

  Output:
    {1} recorded
    {1, 'state_lost'} recorded as `lost` (`state_lost`): Redis had lost the session's records
    {-4} stale: the session has already ended (for example as `lost`) or is not this owner's
    {-11} bad_argument: the state is not a terminal state, or the reason is unknown or does not go with it
]]
local rcall = redis.call
--- @include "includes/sessionKeys"
local K = sessionKeys(KEYS, ARGV[13])
local sessionId = ARGV[1]
local owner = ARGV[2]
local state = ARGV[3]
local exitCode = ARGV[4]
local userId = ARGV[5]
local historyLength = tonumber(ARGV[6])
local reason = ARGV[7]
local fence = tonumber(ARGV[8])
local startedAt = tonumber(ARGV[9])
local workerId = ARGV[10]
local labels = ARGV[11]
local pool = ARGV[12]

--- @include "includes/nowMs"
--- @include "includes/endSession"

local terminal = { completed = true, failed = true, expired = true, stopped = true, lost = true }
if not terminal[state] then return { -11 } end
-- Each reason a host may give, and the one state it goes with (`lost` says its own reason).
local reasonState = { out_of_memory = 'failed', idle = 'stopped' }
if reason == nil or reason == '' then
  reason = nil
elseif reasonState[reason] ~= state then
  return { -11 }
end
local s = rcall('HMGET', K.session, 'id', 'owner', 'state')
if s[1] == sessionId and s[2] == owner then
  endSession(K, userId, historyLength, state, tonumber(exitCode), nowMs(), reason)
  return { 1 }
end
if s[1] == sessionId then
  if s[3] ~= 'pending' then return { -4 } end
  -- Still pending: the claim that started it on this host was lost.
  endSession(K, userId, historyLength, 'lost', tonumber(exitCode), nowMs(), 'state_lost')
  return { 1, 'state_lost' }
end
-- Not live: ended already (its history says so), or its records were lost altogether.
local needle = '"sessionId":' .. cjson.encode(sessionId)
for _, entry in ipairs(rcall('LRANGE', K.history, 0, -1)) do
  if string.find(entry, needle, 1, true) then return { -4 } end
end
local now = nowMs()
recordEnding(K, userId, historyLength, { sessionId = sessionId, fence = fence, state = 'lost', endedAt = now,
  reason = 'state_lost', workerId = workerId, startedAt = startedAt, pool = pool,
  exitCode = tonumber(exitCode) }, now, labels)
rcall('HSET', K.ids, sessionId, userId)
return { 1, 'state_lost' }
