--[[
  Rolls back an admission whose session could not be handed on (the enqueue failed, or the admission's
  own answer was lost to a timeout): the token becomes usable again for the rest of its life, the spawn
  throttle returns to where it was, and the pending session disappears without a trace in the history;
  readers of the events, who saw it `pending`, get a `withdrawn` event.
  The restored token keeps when it was issued, its labels and its pool; the session leaves the slot's
  session ids. The fence stays used: fences only grow. A tombstone makes a late copy of the admission a no-op, so
  the rollback holds whichever of the two Redis executes first.

  Input:
    KEYS[1] the user's session key (hash: the live session)
    KEYS[2] token key the session was admitted with
    KEYS[3] the user's spawn throttle key
    KEYS[4] the live-session index of the user's slot
    KEYS[5] the tombstone of this admission (string, expires)
    KEYS[6] the event stream of the user's slot (capped stream of JSON events)
    KEYS[7] the session ids of the user's slot (hash: session id → user id)

    ARGV[1] session id of the admission to roll back
    ARGV[2] user id
    ARGV[3] tombstone time to live, milliseconds
    ARGV[4] the event channel the events are published on (`<prefix>:events`: a channel, not a key)

  Output:
    {1, tokenRestored (1|0)} rolled back; 0 when the token had expired meanwhile
    {-4} stale: no pending session with this id (claimed, ended, or not admitted: then never will be)
]]
local rcall = redis.call
local sessionKey = KEYS[1]
local tokenKey = KEYS[2]
local throttleKey = KEYS[3]
local liveIndexKey = KEYS[4]
local tombstoneKey = KEYS[5]
local eventsKey = KEYS[6]
local idsKey = KEYS[7]
local sessionId = ARGV[1]
local userId = ARGV[2]
local tombstoneTtlMs = tonumber(ARGV[3])
local eventChannel = ARGV[4]

--- @include "includes/nowMs"
--- @include "includes/events"
--- @include "includes/gcra"

rcall('SET', tombstoneKey, '1', 'PX', tombstoneTtlMs)
local s = rcall('HMGET', sessionKey, 'id', 'state', 'meta', 'tokL', 'tokE', 'ptat', 'fence', 'idle', 'tokA', 'lab',
  'pool')
if s[1] ~= sessionId or s[2] ~= 'pending' then return { -4 } end

local now = nowMs()
local restored = 0
local tokenExpiresAt = tonumber(s[5])
if tokenExpiresAt > now then
  rcall('HSET', tokenKey, 'm', s[3], 'l', s[4], 'e', tokenExpiresAt, 'i', s[8] or 0, 'a', s[9] or 0,
    'lab', s[10] or '{}', 'pool', s[11] or 'default')
  rcall('PEXPIRE', tokenKey, tokenExpiresAt - now)
  restored = 1
end
gcraRestore(throttleKey, tonumber(s[6]), now)
rcall('DEL', sessionKey)
rcall('ZREM', liveIndexKey, userId)
rcall('HDEL', idsKey, sessionId)
emitEvent(eventsKey, eventChannel, { type = 'withdrawn', sessionId = sessionId, userId = userId,
  fence = tonumber(s[7]), pool = s[11] or 'default' }, now, s[10] or '{}')
return { 1, restored }
