--[[
  Changes the lifetime of the user's live session. A running one now ends at now + lifetimeMs (sooner or
  later than before), never later than its start + the lifetime cap; its lease's hard deadline moves with
  it in the same step, keeping the stop grace the claim gave it. A pending one gets lifetimeMs as the
  lifetime it will have once claimed (at most the cap). An overdue session is first ended as `lost`.

  The lease's time to live is left alone: its owner learns the new deadlines at its next renewal, which
  caps the lease by the new hard deadline. Cutting the TTL here could end the lease in Redis before the
  owner knows (a host cut off from Redis just after this call would keep its session past the lease).

  Input:
    KEYS[1] the user's session key (hash: the live session)
    KEYS[2] the user's session lease key (hash {o, f, d = hard deadline epoch ms})
    KEYS[3] the user's history key (list of JSON, newest first)
    KEYS[4] the live-session index of the user's slot
    KEYS[5] the recent endings of the user's slot (list of JSON, newest first, capped)
    KEYS[6] the event stream of the user's slot (capped stream of JSON events)

    ARGV[1] user id
    ARGV[2] history length, entries kept per user
    ARGV[3] the new lifetime, milliseconds (from now for a running session, from its start for a pending one)
    ARGV[4] maximum session lifetime, milliseconds: the cap from the session's start

  Output:
    {1, field, value, field, value, ...} changed: the live session's hash after the change
    {-10} no_session: the user has no live session
    {-15, largest lifetimeMs allowed now} lifetime_too_long: it would end after its start + the cap
    {-16, sessionId} session_stopping: a stop is under way; its lifetime no longer matters
]]
local rcall = redis.call
local sessionKey = KEYS[1]
local leaseKey = KEYS[2]
local historyKey = KEYS[3]
local shardKey = KEYS[4]
local endedKey = KEYS[5]
local eventsKey = KEYS[6]
local userId = ARGV[1]
local historyLength = tonumber(ARGV[2])
local lifetimeMs = tonumber(ARGV[3])
local maxLifetimeMs = tonumber(ARGV[4])

--- @include "includes/nowMs"
--- @include "includes/settleSession"

local now = nowMs()
local state = settleSession(sessionKey, leaseKey, historyKey, shardKey, endedKey, eventsKey, userId, historyLength, now)
if not state then return { -10 } end
if state == 'stopping' then return { -16, rcall('HGET', sessionKey, 'id') } end

if state == 'pending' then
  if lifetimeMs > maxLifetimeMs then return { -15, maxLifetimeMs } end
  rcall('HSET', sessionKey, 'life', lifetimeMs)
else
  local s = rcall('HMGET', sessionKey, 'started', 'deadline')
  local started = tonumber(s[1])
  local largest = started + maxLifetimeMs - now
  if lifetimeMs > largest then return { -15, math.max(0, largest) } end
  -- The claim set the hard deadline to the deadline plus the stop grace; this keeps that distance, so it
  -- holds for sessions claimed by any host version.
  local graceMs = tonumber(rcall('HGET', leaseKey, 'd')) - tonumber(s[2])
  local deadline = now + lifetimeMs
  rcall('HSET', leaseKey, 'd', deadline + graceMs)
  rcall('HSET', sessionKey, 'deadline', deadline, 'life', deadline - started)
end
local fields = rcall('HGETALL', sessionKey)
table.insert(fields, 1, 1)
return fields
