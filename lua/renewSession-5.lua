--[[
  The owner of a running session renews its lease (never past the lease's hard deadline) and learns
  whether a stop was requested and the session's current deadlines (a lifetime change through the API
  moves them). It also keeps the idle clock: the renewal brings the latest activity the host saw of the
  session (last activity never moves backwards), and a running session whose idle timeout has passed
  without activity is marked stopping here, as a stop request does (emits `stopping`), with the stop
  reason `idle`. Called every third of the lease by the worker host, at once when its channel says the
  session changed (a stop, a lifetime), and once more when idleness or the deadline is due.

  Kept to four commands and the call (TIME, HMGET, PEXPIRE, ZADD; HSET when the session was active): it
  runs for every running session every third of its lease. A session its host holds under its host lease
  (see heartbeatWorker) is renewed with a longer lease, far less often, and learns which Redis process
  answered (ARGV[5]: the slot's loss guard is asked, two commands more), so that its host can tell when
  that process is replaced (probeSlot) and the session's records may have been lost with it. The owner and the hard deadline come from
  the session hash, which the claim and every lifetime change write in the same step as the lease (a
  session claimed by a host of an earlier version has no `hard` there: its lease is read as before).

  Input:
    KEYS[1] the user's session lease key (hash {o = owner, f = fence, d = hard deadline epoch ms})
    KEYS[2] the user's session key (hash: the live session)
    KEYS[3] the live-session index of the user's slot
    KEYS[4] the event stream of the user's slot (capped stream of JSON events)
    KEYS[5] the loss guard of the user's slot (hash, see includes/lossGuard)

    ARGV[1] lease owner id
    ARGV[2] lease time to live, milliseconds
    ARGV[3] user id
    ARGV[4] activity age, milliseconds: how long before this renewal was sent the host last saw the
            session active ('' when it has seen no activity)
    ARGV[5] '1' to answer the run_id of the Redis process (asks the slot's loss guard), '' not to
    ARGV[6] the loss guard's lease when no claim told the slot one, milliseconds (see includes/lossGuard)
    ARGV[7] the loss guard's slack on top of that lease in its wait after a loss, milliseconds
    ARGV[8] the event channel the events are published on (`<prefix>:events`: a channel, not a key)

  Output:
    {1, leaseExpiresAt (epoch ms), stopRequested (1|0), now (epoch ms), hardDeadline (epoch ms),
      deadline (epoch ms), idleAt (epoch ms, 0 without an idle timeout), stop reason ('requested' |
      'idle' | ''), run_id ('' unless asked)} renewed: the lease holds until leaseExpiresAt, never past
      hardDeadline; the session's lifetime runs out at deadline; without activity it counts as idle at
      idleAt
    {-7} lease_lost: not the owner, or the lease expired (the session must stop at once)
    {-8, hardDeadline} deadline_reached: the lease runs out at its hard deadline and cannot be renewed
]]
local rcall = redis.call
local leaseKey = KEYS[1]
local sessionKey = KEYS[2]
local liveIndexKey = KEYS[3]
local eventsKey = KEYS[4]
local owner = ARGV[1]
local leaseMs = tonumber(ARGV[2])
local userId = ARGV[3]
local activityAge = tonumber(ARGV[4])
local guardKey = KEYS[5]
local wantRun = ARGV[5] == '1'
local eventChannel = ARGV[8]

--- @include "includes/nowMs"
--- @include "includes/extendLease"
--- @include "includes/events"
--- @include "includes/lossGuard"

local now = nowMs()
local s = rcall('HMGET', sessionKey, 'owner', 'stop', 'deadline', 'idle', 'act', 'state', 'id', 'fence', 'worker',
  'hard')
if s[1] ~= owner then return { -7 } end
local expiresAt, hardDeadline
local hard = tonumber(s[10])
if hard then
  if now >= hard then return { -8, hard } end
  local ttl = math.min(leaseMs, hard - now)
  -- The lease is this owner's while the session hash says so (both change only together); gone, it expired.
  if rcall('PEXPIRE', leaseKey, ttl) ~= 1 then return { -7 } end
  expiresAt, hardDeadline = now + ttl, hard
else
  local code
  code, expiresAt, hardDeadline = extendLease(leaseKey, owner, leaseMs, now)
  if code == -7 then return { -7 } end
  if code == -8 then return { -8, hardDeadline } end
end
rcall('ZADD', liveIndexKey, expiresAt, userId)
local stop = s[2]
local lastActivity = tonumber(s[5])
if lastActivity and activityAge then
  local seen = now - math.max(0, activityAge)
  if seen > lastActivity then
    lastActivity = seen
    rcall('HSET', sessionKey, 'act', lastActivity)
  end
end
local idleTimeoutMs = tonumber(s[4]) or 0
local idleAt = 0
if idleTimeoutMs > 0 and lastActivity then
  idleAt = lastActivity + idleTimeoutMs
  if s[6] == 'running' and now >= idleAt then
    stop = 'idle'
    rcall('HSET', sessionKey, 'state', 'stopping', 'stop', stop)
    local labelsAndPool = rcall('HMGET', sessionKey, 'lab', 'pool')
    emitEvent(eventsKey, eventChannel, { type = 'stopping', sessionId = s[7], userId = userId,
      fence = tonumber(s[8]), workerId = s[9], pool = labelsAndPool[2] or 'default' }, now,
      labelsAndPool[1] or '{}')
  end
end
local run = ''
if wantRun then run = lossGuard(guardKey, now, tonumber(ARGV[6]), tonumber(ARGV[7])).run end
return { 1, expiresAt, stop and 1 or 0, now, hardDeadline, tonumber(s[3]), idleAt, stop or '', run }
