--[[
  Ends the user's current session as `lost` when it is overdue: pending past its pending deadline, or
  running / stopping without a live lease. Returns the state of the session still live, or false when
  there is none (any more).
]]
--- @include "endSession"

-- K is the session's key group (see includes/sessionKeys).
local function settleSession(K, userId, historyLength, now)
  local s = rcall('HMGET', K.session, 'state', 'pdl', 'fence')
  local state = s[1]
  if not state then return false end
  local overdue
  if state == 'pending' then
    overdue = now >= tonumber(s[2])
  else
    overdue = rcall('HGET', K.lease, 'f') ~= s[3]
  end
  if overdue then
    endSession(K, userId, historyLength, 'lost', nil, now)
    return false
  end
  return state
end
