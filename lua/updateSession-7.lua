--[[
  Changes the user's live session (PATCH): its labels, its lifetime, or both, all or nothing. Labels are
  merged into the session's (a key set to null is removed); the result may hold at most ARGV[7] labels.
  Lifetime: a running one now ends at now + lifetimeMs (sooner or
  later than before), never later than its start + the lifetime cap; its lease's hard deadline moves with
  it in the same step, keeping the stop grace the claim gave it. A pending one gets lifetimeMs as the
  lifetime it will have once claimed (at most the cap). An overdue session is first ended as `lost`.

  The lease's time to live is left alone: its owner, told on its channel, renews at once and learns the
  new deadlines, and that renewal caps the lease by the new hard deadline. Cutting the TTL here could end
  the lease in Redis before the owner knows (a host cut off from Redis just after this call would keep
  its session past the lease).

  Input:
    KEYS[1] the user's session key (hash: the live session)
    KEYS[2] the user's session lease key (hash {o, f, d = hard deadline epoch ms})
    KEYS[3] the user's history key (list of JSON, newest first)
    KEYS[4] the live-session index of the user's slot
    KEYS[5] the recent endings of the user's slot (list of JSON, newest first, capped)
    KEYS[6] the event stream of the user's slot (capped stream of JSON events)
    KEYS[7] the session ids of the user's slot (hash: session id → user id)

    ARGV[1] user id
    ARGV[2] history length, entries kept per user
    ARGV[3] the new lifetime, milliseconds (from now for a running session, from its start for a pending
            one); '' to leave it
    ARGV[4] maximum session lifetime, milliseconds: the cap from the session's start
    ARGV[5] the session meant ('' for whichever is live): act only when the live session is this one
    ARGV[6] labels to merge, JSON object of strings or null (null removes the key); '' to leave them
    ARGV[7] most labels a session may have
    ARGV[8] the event channel the events are published on (`<prefix>:events`: a channel, not a key)
    ARGV[9] the start of every worker host's channel (`<prefix>:host:`, then the host's id), for its nudge

  Output:
    {1, field, value, field, value, ...} changed: the live session's hash after the change
    {-10} no_session: the user has no live session
    {-15, largest lifetimeMs allowed now} lifetime_too_long: it would end after its start + the cap
    {-16, sessionId} session_stopping: a stop is under way; its lifetime no longer matters
    {-17, the live session's id ('' when there is none)} session_mismatch: ARGV[5] names a session and the
      user's live session is another one, or there is none; nothing was changed
    {-20, labels after the merge} too_many_labels: the merge would leave more than ARGV[7] labels
]]
local rcall = redis.call
--- @include "includes/sessionKeys"
local K = sessionKeys(KEYS, ARGV[8])
local userId = ARGV[1]
local historyLength = tonumber(ARGV[2])
local lifetimeMs = tonumber(ARGV[3])
local maxLifetimeMs = tonumber(ARGV[4])
local expectedSessionId = ARGV[5]
local labelPatch = ARGV[6]
local maxLabels = tonumber(ARGV[7])
local hostChannels = ARGV[9]

--- @include "includes/settleForChange"
--- @include "includes/sessionFields"

local now, state, refusal = settleForChange(K, userId, historyLength, expectedSessionId)
if refusal then return refusal end
if state == 'stopping' then return { -16, rcall('HGET', K.session, 'id') } end

-- Labels first: a refusal here leaves the lifetime as it was too.
local labels
if labelPatch ~= '' then
  labels = cjson.decode(rcall('HGET', K.session, 'lab') or '{}')
  local count = 0
  for key, value in pairs(cjson.decode(labelPatch)) do
    if value == cjson.null then labels[key] = nil else labels[key] = value end
  end
  for _ in pairs(labels) do count = count + 1 end
  if count > maxLabels then return { -20, count } end
end

if not lifetimeMs then
  -- Labels alone.
elseif state == 'pending' then
  if lifetimeMs > maxLifetimeMs then return { -15, maxLifetimeMs } end
  rcall('HSET', K.session, 'life', lifetimeMs)
else
  local s = rcall('HMGET', K.session, 'started', 'deadline')
  local started = tonumber(s[1])
  local largest = started + maxLifetimeMs - now
  if lifetimeMs > largest then return { -15, math.max(0, largest) } end
  -- The claim set the hard deadline to the deadline plus the stop grace; this keeps that distance, so it
  -- holds for sessions claimed by any host version.
  local graceMs = tonumber(rcall('HGET', K.lease, 'd')) - tonumber(s[2])
  local deadline = now + lifetimeMs
  rcall('HSET', K.lease, 'd', deadline + graceMs)
  rcall('HSET', K.session, 'deadline', deadline, 'life', deadline - started, 'hard', deadline + graceMs)
  nudgeHost(hostChannels, rcall('HGET', K.session, 'worker'), userId)
end
-- (cjson writes an empty table as an object, '{}'.)
if labels then rcall('HSET', K.session, 'lab', cjson.encode(labels)) end
local fields = sessionFields(K, userId)
table.insert(fields, 1, 1)
return fields
