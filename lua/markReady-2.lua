--[[
  The owner of a running session marks it ready, with the endpoint where it can be reached and the port
  the session proxy opens by default (a later call may change either). Only the session's owner, only
  while it runs or stops. Emits `ready` (again only when the endpoint or the port changes).

  Input:
    KEYS[1] the user's session key (hash: the live session)
    KEYS[2] the event stream of the user's slot (capped stream of JSON events)

    ARGV[1] lease owner id
    ARGV[2] endpoint ('' for none), at most 512 characters
    ARGV[3] the event channel the events are published on (`<prefix>:events`: a channel, not a key)
    ARGV[4] the port (1 to 65535; '' for none)

  Output:
    {1, changed (1|0)} marked ready
    {-7} lease_lost: not the owner any more (the session ended or moved on)
]]
local rcall = redis.call
local sessionKey = KEYS[1]
local eventsKey = KEYS[2]
local owner = ARGV[1]
local endpoint = ARGV[2]
local eventChannel = ARGV[3]
local port = ARGV[4] or ''

--- @include "includes/nowMs"
--- @include "includes/events"

local s = rcall('HMGET', sessionKey, 'owner', 'ready', 'endpoint', 'id', 'user', 'fence', 'worker', 'lab', 'pool',
  'port')
if s[1] ~= owner then return { -7 } end
if s[2] == '1' and (s[3] or '') == endpoint and (s[10] or '') == port then return { 1, 0 } end
rcall('HSET', sessionKey, 'ready', '1', 'endpoint', endpoint, 'port', port)
local event = { type = 'ready', sessionId = s[4], userId = s[5], fence = tonumber(s[6]), workerId = s[7],
  pool = s[9] or 'default' }
if endpoint ~= '' then event['endpoint'] = endpoint end
if port ~= '' then event['port'] = tonumber(port) end
emitEvent(eventsKey, eventChannel, event, nowMs(), s[8] or '{}')
return { 1, 1 }
