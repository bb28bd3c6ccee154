--[[
  A worker host claims a pending session: only for the matching session id and fence, only while it is
  still pending and within its pending deadline. Starts the lifetime clock and takes the session lease,
  whose hard deadline (the lifetime cap plus the stop grace) no renewal can pass. Starts the idle clock
  too: its start is the session's first activity. Emits `running`. A session admitted before the slot's
  loss guard's `since` (includes/lossGuard) is not started: Redis may have lost its claim, and it may run
  on another host; it ends `lost` with reason `state_lost`. The claim's lease is the guard's `lease` when
  longer than any before.

  Input:
    KEYS[1] the user's session key (hash: the live session)
    KEYS[2] the user's session lease key (hash {o = owner, f = fence, d = hard deadline epoch ms})
    KEYS[3] the user's history key (list of JSON, newest first)
    KEYS[4] the live-session index of the user's slot
    KEYS[5] the recent endings of the user's slot (list of JSON, newest first, capped)
    KEYS[6] the event stream of the user's slot (capped stream of JSON events)
    KEYS[7] the session ids of the user's slot (hash: session id → user id)
    KEYS[8] the loss guard of the user's slot (hash, see includes/lossGuard)

    ARGV[1] session id from the job
    ARGV[2] fence from the job
    ARGV[3] lease owner id (random per claim)
    ARGV[4] worker host id
    ARGV[5] lease time to live, milliseconds
    ARGV[6] stop grace, milliseconds: the lease may outlive the lifetime cap by this much, to stop the process
    ARGV[7] user id
    ARGV[8] history length, entries kept per user
    ARGV[9] the pool the claiming host serves: a session of another pool is not claimed
    ARGV[10] the loss guard's lease when no claim told the slot one, milliseconds (see includes/lossGuard)
    ARGV[11] the loss guard's slack on top of that lease in its wait after a loss, milliseconds
    ARGV[12] the event channel the events are published on (`<prefix>:events`: a channel, not a key)

  Output:
    {1, deadline (epoch ms), leaseExpiresAt (epoch ms), lifetimeMs, metadata JSON, startedAt (epoch ms),
      idleTimeoutMs (0: never idle), labels JSON, pool} claimed
    {-4} stale: no pending session with this id and fence (already claimed, stopped, ended or replaced)
    {-6} pending_timeout: the session waited too long and has now been ended as `lost`
    {-4, 'state_lost'} stale: the session was admitted before Redis may have lost writes, and has now
          been ended as `lost` (`state_lost`)
    {-4, 'wrong_pool', the session's pool} stale: the session is of another pool than the host's; nothing
          changed (its job reached a queue of another pool: API and hosts disagree on the queues)
]]
local rcall = redis.call
--- @include "includes/sessionKeys"
local K = sessionKeys(KEYS, ARGV[12])
local guardKey = KEYS[8]
local sessionId = ARGV[1]
local fence = ARGV[2]
local owner = ARGV[3]
local workerId = ARGV[4]
local leaseMs = tonumber(ARGV[5])
local graceMs = tonumber(ARGV[6])
local userId = ARGV[7]
local historyLength = tonumber(ARGV[8])
local hostPool = ARGV[9]

--- @include "includes/nowMs"
--- @include "includes/endSession"
--- @include "includes/lossGuard"

local s = rcall('HMGET', K.session, 'id', 'fence', 'state', 'pdl', 'life', 'meta', 'idle', 'created', 'g', 'lab',
  'pool')
if s[1] ~= sessionId or s[2] ~= fence or s[3] ~= 'pending' then return { -4 } end
if (s[11] or 'default') ~= hostPool then return { -4, 'wrong_pool', s[11] or 'default' } end

local now = nowMs()
-- The session's stamp (from its admission) stands in for the guard while that process runs.
if not lossStampCovers(s[9], ARGV[5]) then
  local guard = lossGuard(guardKey, now, tonumber(ARGV[10]), tonumber(ARGV[11]))
  if (tonumber(s[8]) or 0) < guard.since then
    endSession(K, userId, historyLength, 'lost', nil, now, 'state_lost')
    return { -4, 'state_lost' }
  end
  lossGuardLease(guardKey, guard, leaseMs)
end
if now >= tonumber(s[4]) then
  endSession(K, userId, historyLength, 'lost', nil, now)
  return { -6 }
end

local lifetimeMs = tonumber(s[5])
local deadline = now + lifetimeMs
local hardDeadline = deadline + graceMs
local leaseExpiresAt = now + math.min(leaseMs, hardDeadline - now)
rcall('DEL', K.lease)
rcall('HSET', K.lease, 'o', owner, 'f', fence, 'd', hardDeadline)
rcall('PEXPIREAT', K.lease, leaseExpiresAt)
rcall('HSET', K.session, 'state', 'running', 'worker', workerId, 'owner', owner,
  'started', now, 'deadline', deadline, 'hard', hardDeadline, 'leaseExp', leaseExpiresAt, 'act', now)
rcall('ZADD', K.liveIndex, leaseExpiresAt, userId)
local labels, pool = s[10] or '{}', s[11] or 'default'
emitEvent(K.events, K.channel, { type = 'running', sessionId = sessionId, userId = userId,
  fence = tonumber(fence), workerId = workerId, deadline = deadline, pool = pool }, now, labels)
return { 1, deadline, leaseExpiresAt, lifetimeMs, s[6], now, tonumber(s[7]) or 0, labels, pool }
