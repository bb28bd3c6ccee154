--[[
  Ends the user's current session as `lost` when it is overdue: pending past its pending deadline, or
  running / stopping without a live lease. Returns the state of the session still live, or false when
  there is none (any more).
]]
--- @include "endSession"

local function settleSession(sessionKey, leaseKey, historyKey, shardKey, endedKey, eventsKey, userId, historyLength, now)
  local s = rcall('HMGET', sessionKey, 'state', 'pdl', 'fence')
  local state = s[1]
  if not state then return false end
  local overdue
  if state == 'pending' then
    overdue = now >= tonumber(s[2])
  else
    overdue = rcall('HGET', leaseKey, 'f') ~= s[3]
  end
  if overdue then
    endSession(sessionKey, leaseKey, historyKey, shardKey, endedKey, eventsKey, userId, historyLength, 'lost', nil, now)
    return false
  end
  return state
end
