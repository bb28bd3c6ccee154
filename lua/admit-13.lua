--[[
  Admits a spawn: one all-or-nothing decision (unless this very admission was already cancelled). Checked in this order: the token is valid, the user has
  no live session (an overdue one is first ended as `lost`), the spawn throttle (GCRA) is open, and then
  the slot's loss guard (includes/lossGuard): while Redis may still have sessions it lost the records of,
  nothing is admitted, and a token issued before the last possible loss is invalid. Only then it consumes the token, moves the throttle, takes the next fence (above the guard's floor), records the session as `pending` and
  emits its `pending` event. The session keeps the token's labels and pool, and is entered in the slot's
  session ids; a slot that is not in the session list's directory (its `listed` key is missing: no live
  session there since the directory last dropped it) admits nothing until its caller has entered it
  (-19 unlisted; SessionStore registers the slot and asks again).
  A rejection writes nothing but the ending of an overdue session.

  Input:
    KEYS[1] token key (hash {m = metadata JSON, l = lifetime ms or '', e = expiresAt epoch ms, i = idle timeout ms,
            a = issued at epoch ms, g = the loss guard's stamp when it was issued (includes/lossGuard), or absent,
            lab = labels JSON ('{}' when absent), pool = pool name ('default' when absent)})
    KEYS[2] the user's session key (hash: the live session)
    KEYS[3] the user's fence counter key (integer, never expires)
    KEYS[4] the user's spawn throttle key (string; its expiry is the GCRA theoretical arrival time)
    KEYS[5] the user's session lease key (hash {o, f, d})
    KEYS[6] the user's history key (list of JSON, newest first)
    KEYS[7] the live-session index of the user's slot (sorted set: userId by due time, epoch ms)
    KEYS[8] the recent endings of the user's slot (list of JSON, newest first, capped)
    KEYS[9] the tombstone of this admission (exists once the admission was cancelled)
    KEYS[10] the event stream of the user's slot (capped stream of JSON events)
    KEYS[11] the loss guard of the user's slot (hash, see includes/lossGuard)
    KEYS[12] the session ids of the user's slot (hash: session id → user id)
    KEYS[13] the slot's entry in the session list's directory (string: the entry's generation; absent: not listed)

    ARGV[1] session id (chosen by the caller, unique)
    ARGV[2] user id
    ARGV[3] spawn emission interval, milliseconds
    ARGV[4] spawn burst, admissions allowed at once
    ARGV[5] maximum session lifetime, milliseconds (caps the token's own request)
    ARGV[6] pending timeout, milliseconds: how long the session may wait for a worker
    ARGV[7] history length, entries kept per user
    ARGV[8] the loss guard's lease when no claim told the slot one, milliseconds (see includes/lossGuard)
    ARGV[9] the loss guard's slack on top of that lease in its wait after a loss, milliseconds
    ARGV[10] the event channel the events are published on (`<prefix>:events`: a channel, not a key)

  Output:
    {1, fence, lifetimeMs, metadata JSON, pendingDeadline (epoch ms), limit, remaining, resetAfterMs, pool} admitted
    {-1} token_invalid: unknown, expired or already used
    {-1, 'before_loss'} token_invalid: issued before Redis last may have lost writes (it may have been spent in them)
    {-2, sessionId, state} session_exists: the user's live session
    {-3, limit, remaining, retryAfterMs, resetAfterMs} throttled
    {-12} cancelled: this admission was cancelled before it arrived (a late copy of a timed-out call)
    {-18, retryAfterMs, since} state_uncertain: Redis may have lost writes (it restarted or failed over at
          since, epoch ms) and sessions admitted before may still run: nothing is admitted for retryAfterMs
    {-19} unlisted: the slot is not in the session list's directory; nothing was written
]]
local rcall = redis.call
local tokenKey = KEYS[1]
local fenceKey = KEYS[3]
local throttleKey = KEYS[4]
local tombstoneKey = KEYS[9]
local guardKey = KEYS[11]
local listedKey = KEYS[13]
-- The session's key group (see includes/sessionKeys), here in this script's own order.
local K = { session = KEYS[2], lease = KEYS[5], history = KEYS[6], liveIndex = KEYS[7], ended = KEYS[8],
  events = KEYS[10], ids = KEYS[12], channel = ARGV[10] }
local sessionId = ARGV[1]
local userId = ARGV[2]
local intervalMs = tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
local maxLifetimeMs = tonumber(ARGV[5])
local pendingTimeoutMs = tonumber(ARGV[6])
local historyLength = tonumber(ARGV[7])

--- @include "includes/nowMs"
--- @include "includes/gcra"
--- @include "includes/settleSession"
--- @include "includes/lossGuard"

if rcall('EXISTS', tombstoneKey) == 1 then return { -12 } end
local token = rcall('HMGET', tokenKey, 'm', 'l', 'e', 'i', 'a', 'g', 'lab', 'pool')
if not token[1] then return { -1 } end

local now = nowMs()
if settleSession(K, userId, historyLength, now) then
  local live = rcall('HMGET', K.session, 'id', 'state')
  return { -2, live[1], live[2] }
end

local allowed, tat, newTat, remaining, retryAfterMs = gcraCheck(throttleKey, intervalMs, burst)
if not allowed then
  return { -3, burst, 0, retryAfterMs, tat }
end

-- Only an admission needs the loss guard (a refusal admits nothing), and it runs last, before anything
-- is written: a refusal of its own spends nothing either. The token's stamp stands in for the guard while
-- the process that issued it runs.
local floor, stamp = lossStampFloor(token[6])
if not floor then
  local guard = lossGuard(guardKey, now, tonumber(ARGV[8]), tonumber(ARGV[9]), 'session')
  if now < guard.untilMs then return { -18, guard.untilMs - now, guard.since } end
  if (tonumber(token[5]) or 0) < guard.since then return { -1, 'before_loss' } end
  floor, stamp = guard.floor, guard.stamp
end
if rcall('EXISTS', listedKey) == 0 then return { -19 } end

-- The throttle's previous TAT (epoch ms; '' when the quota was full), for a cancellation to restore.
local previousTat = gcraTatAt(tat, now) or ''
gcraCommit(throttleKey, tat, newTat)
rcall('DEL', tokenKey)
local labels, pool = token[7] or '{}', token[8] or 'default'
local lifetimeMs = maxLifetimeMs
if token[2] ~= '' and tonumber(token[2]) < maxLifetimeMs then lifetimeMs = tonumber(token[2]) end
local fence = rcall('INCR', fenceKey)
if fence <= floor then
  fence = floor + 1
  rcall('SET', fenceKey, string.format('%.0f', fence))
end
local pendingDeadline = now + pendingTimeoutMs
rcall('HSET', K.session,
  'id', sessionId, 'user', userId, 'fence', fence, 'state', 'pending', 'created', now,
  'pdl', pendingDeadline, 'life', lifetimeMs, 'meta', token[1],
  'tokL', token[2], 'tokE', token[3], 'tokA', token[5] or '', 'ptat', previousTat, 'idle', tonumber(token[4]) or 0,
  'lab', labels, 'pool', pool, 'g', stamp)
rcall('ZADD', K.liveIndex, pendingDeadline, userId)
rcall('HSET', K.ids, sessionId, userId)
emitEvent(K.events, K.channel, { type = 'pending', sessionId = sessionId, userId = userId,
  fence = fence, lifetimeMs = lifetimeMs, pool = pool }, now, labels)
return { 1, fence, lifetimeMs, token[1], pendingDeadline, burst, remaining, newTat, pool }
