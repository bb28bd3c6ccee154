--[[
  Ends the user's current session with a terminal state: appends it to the capped history and to the
  slot's list of recent endings (for the dashboard), removes the live record and its index entry, and
  deletes the lease when it belongs to this session, and emits the terminal event. A `lost` ending says
  why: `state_lost` when its caller says so (Redis may have lost its records), else `not_claimed` when
  the session was still pending (no worker host took it in time), `host_lost` when a host had it. Any other ending carries the `reason` its caller gives (e.g. `out_of_memory` for
  `failed`; nil: none) in the history entry, the recent endings and the event alike. Every record of the
  ending carries the session's pool and labels. A session trimmed off the history leaves the slot's ids.
]]
--- @include "events"
local RECENT_ENDINGS_PER_SLOT = 20

-- Records an ending described by `entry` (sessionId, fence, state, endedAt, pool and what else it has)
-- with `labels` (JSON text): in the user's history, the slot's recent endings and the event stream.
local function recordEnding(K, userId, historyLength, entry, now, labels)
  local withLabels = ',"labels":' .. labels .. '}'
  local length = rcall('LPUSH', K.history, string.sub(cjson.encode(entry), 1, -2) .. withLabels)
  if length > historyLength then
    for _, old in ipairs(rcall('LRANGE', K.history, historyLength, -1)) do
      local id = string.match(old, '"sessionId":"([^"]+)"')
      if id then rcall('HDEL', K.ids, id) end
    end
    rcall('LTRIM', K.history, 0, historyLength - 1)
  end
  entry['userId'] = userId
  rcall('LPUSH', K.ended, string.sub(cjson.encode(entry), 1, -2) .. withLabels)
  rcall('LTRIM', K.ended, 0, RECENT_ENDINGS_PER_SLOT - 1)
  emitEvent(K.events, K.channel, { type = entry.state, sessionId = entry.sessionId, userId = userId,
    fence = entry.fence, workerId = entry.workerId, exitCode = entry.exitCode, reason = entry.reason,
    pool = entry.pool }, now, labels)
end

-- K is the session's key group (see includes/sessionKeys).
local function endSession(K, userId, historyLength, state, exitCode, now, reason)
  local s = rcall('HMGET', K.session, 'id', 'fence', 'worker', 'started', 'state', 'lab', 'pool')
  local entry = { sessionId = s[1], fence = tonumber(s[2]), state = state, endedAt = now, pool = s[7] or 'default' }
  if state == 'lost' and reason ~= 'state_lost' then
    if s[5] == 'pending' then entry['reason'] = 'not_claimed' else entry['reason'] = 'host_lost' end
  elseif reason then
    entry['reason'] = reason
  end
  if s[3] then entry['workerId'] = s[3] end
  if s[4] then entry['startedAt'] = tonumber(s[4]) end
  if exitCode ~= nil then entry['exitCode'] = exitCode end
  recordEnding(K, userId, historyLength, entry, now, s[6] or '{}')
  if rcall('HGET', K.lease, 'f') == s[2] then rcall('DEL', K.lease) end
  rcall('DEL', K.session)
  rcall('ZREM', K.liveIndex, userId)
end
