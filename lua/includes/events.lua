--[[
  Session events. Every state change of a session is appended, in the script that makes the change, to
  the event stream of the user's cluster slot (so an event exists exactly when its change does), and
  published on the prefix's event channel (`<prefix>:events`, Keys's eventChannel, which every script
  that emits takes as an argument: a channel is not a key), so an API process learns of it at once
  without reading 16384 streams. The message is `<entry id> <event JSON>`; `at` is Redis TIME, epoch ms.
  Entries older than EVENT_RETENTION_MS are trimmed (MINID, approximate: never sooner), and an idle
  stream expires whole after the same time, so every event of the last EVENT_RETENTION_MS is kept.
  `labels` is the session's labels as the JSON text its record keeps; it goes into the event as it is
  (an empty Lua table could not tell cjson whether it is an object).
]]
local EVENT_RETENTION_MS = 900000

-- Tells the worker host running a session that something it must act on changed (a stop was asked for,
-- the lifetime moved): the user's id on the host's own channel, `<prefix>:host:<workerId>` (Keys's
-- hostChannel), which the host answers by renewing that session at once instead of at its next renewal.
-- The caller passes `hostChannels`, what every host's channel starts with (Keys's hostChannelPrefix):
-- only the session says which host runs it. The renewal stays the source of truth: a nudge lost with the
-- host's subscription is made up for by the renewal of every session that follows each (re)subscription.
local function nudgeHost(hostChannels, workerId, userId)
  if not workerId or workerId == '' then return end
  rcall('PUBLISH', hostChannels .. workerId, userId)
end

-- Appends `event` to `eventsKey` (the slot's stream) and publishes it on `channel` (the event channel).
local function emitEvent(eventsKey, channel, event, now, labels)
  event['at'] = now
  local json = cjson.encode(event)
  json = string.sub(json, 1, -2) .. ',"labels":' .. (labels or '{}') .. '}'
  local id = rcall('XADD', eventsKey, 'MINID', '~', now - EVENT_RETENTION_MS, '*', 'e', json)
  rcall('PEXPIRE', eventsKey, EVENT_RETENTION_MS)
  rcall('PUBLISH', channel, id .. ' ' .. json)
end
