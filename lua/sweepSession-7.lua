--[[
  Sweeps one user found due in the live-session index: ends the session as `lost` when it is pending past
  its pending deadline or running without a live lease; otherwise puts the index entry back at its true
  due time; drops an index entry left without a session. Safe to run from any number of processes.
  Given a session id (ARGV[3]), the session of a host whose host lease ran out (see heartbeatWorker,
  sweepHosts): that session, when it is still the user's live one, was claimed, and was claimed by that
  host (ARGV[4] is the `worker` the claim recorded), is ended as `lost` whatever its own lease says (its
  host stopped it when its host lease could no longer be renewed). A session another host claimed is
  left alone, to its own host and lease: a host registers whatever pairs it sends, and a session id
  claimed twice (which nothing else rules out) must not be ended under the host that runs it. The check
  is by host id: a process restarted under the same WORKER_ID counts as the same host. With ARGV[4]
  empty (a lease token that does not name its host) the session is ended unchecked.

  Input:
    KEYS[1] the user's session key (hash: the live session)
    KEYS[2] the user's session lease key (hash {o, f, d})
    KEYS[3] the user's history key (list of JSON, newest first)
    KEYS[4] the live-session index of the user's slot
    KEYS[5] the recent endings of the user's slot (list of JSON, newest first, capped)
    KEYS[6] the event stream of the user's slot (capped stream of JSON events)
    KEYS[7] the session ids of the user's slot (hash: session id → user id)

    ARGV[1] user id
    ARGV[2] history length, entries kept per user
    ARGV[3] the id of a session whose host's lease ran out ('' for none)
    ARGV[4] the id of that host, from its lease token ('' when the token does not name it: not checked)
    ARGV[5] the event channel the events are published on (`<prefix>:events`: a channel, not a key)

  Output:
    {1} the session was ended as `lost`
    {0, nextDueAt (epoch ms)} still live, due again at that time
    {-10} no_session: there was none (the index entry is removed); with ARGV[3], that session is not the
          live one (nothing changed)
    {-10, 'other_host', workerId} no_session: with ARGV[3], that session is live, but claimed by another
          host than ARGV[4] (nothing changed)
]]
local rcall = redis.call
--- @include "includes/sessionKeys"
local K = sessionKeys(KEYS, ARGV[5])
local userId = ARGV[1]
local historyLength = tonumber(ARGV[2])

--- @include "includes/nowMs"
--- @include "includes/settleSession"

local now = nowMs()
if ARGV[3] ~= '' then
  local s = rcall('HMGET', K.session, 'id', 'state', 'worker')
  if s[1] ~= ARGV[3] then return { -10 } end
  if s[2] ~= 'pending' then
    if ARGV[4] ~= '' and s[3] ~= ARGV[4] then return { -10, 'other_host', s[3] or '' } end
    endSession(K, userId, historyLength, 'lost', nil, now)
    return { 1 }
  end
end
local existed = rcall('EXISTS', K.session) == 1
local state = settleSession(K, userId, historyLength, now)
if not state then
  if existed then return { 1 } end
  rcall('ZREM', K.liveIndex, userId)
  return { -10 }
end
local dueAt
if state == 'pending' then
  dueAt = tonumber(rcall('HGET', K.session, 'pdl'))
else
  dueAt = now + math.max(rcall('PTTL', K.lease), 0)
end
rcall('ZADD', K.liveIndex, dueAt, userId)
return { 0, dueAt }
