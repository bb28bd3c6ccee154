--[[
  The start of every change the API makes to a user's session (stop, lifetime, activity): settles the
  session (see settleSession), then checks the caller's precondition, the session meant
  (`expectedSessionId`, '' for whichever is live). Returns now (epoch ms), the live session's state
  (false: none), and the reply that refuses the change, or nil when it may go ahead:
    { -17, the live session's id ('' when there is none) } session_mismatch: another session is live, or none
    { -10 } no_session: no precondition, and the user has no live session
]]
--- @include "nowMs"
--- @include "settleSession"

-- K is the session's key group (see includes/sessionKeys).
local function settleForChange(K, userId, historyLength, expectedSessionId)
  local now = nowMs()
  local state = settleSession(K, userId, historyLength, now)
  if expectedSessionId ~= '' then
    local liveSessionId = state and rcall('HGET', K.session, 'id') or ''
    if liveSessionId ~= expectedSessionId then return now, state, { -17, liveSessionId } end
  end
  if not state then return now, state, { -10 } end
  return now, state, nil
end
