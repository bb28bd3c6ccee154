--[[
  Reads the user's live session, first ending it as `lost` when it is overdue (pending past its pending
  deadline, or running without a live lease), so a reader never sees a session whose host has died.

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
    ARGV[3] the event channel the events are published on (`<prefix>:events`: a channel, not a key)

  Output:
    {1, field, value, field, value, ...} the live session's hash
    {-10} no_session: the user has no live session
]]
local rcall = redis.call
--- @include "includes/sessionKeys"
local K = sessionKeys(KEYS, ARGV[3])
local userId = ARGV[1]
local historyLength = tonumber(ARGV[2])

--- @include "includes/nowMs"
--- @include "includes/settleSession"
--- @include "includes/sessionFields"

local now = nowMs()
if not settleSession(K, userId, historyLength, now) then
  return { -10 }
end
local fields = sessionFields(K, userId)
table.insert(fields, 1, 1)
return fields
