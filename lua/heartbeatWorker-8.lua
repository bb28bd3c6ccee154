--[[
  A worker host publishes its heartbeat: its record and its share of the capacity last until the
  heartbeat's time to live runs out unless renewed; the holds of the sessions it runs are renewed with
  it, and those of the sessions it ended are given back. A host told to drain stays draining until it
  withdraws (a new process under the same id, with another start time, starts active).

  The heartbeat also renews the host's lease (Chubby's session): one lease per host process, which its
  sessions hold once registered under it, so that a running session costs no renewal of its own every
  third of LEASE_MS. A lease that ran out is never renewed: the host has stopped its sessions by then (on
  its own clock), a sweep ends them as `lost` (sweepHosts), and the host takes a new lease. While the
  slot's loss guard waits after Redis may have lost writes, a lease that is gone or looks run out may
  only have lost its renewals with those writes, and no sweep ends anything meanwhile: it is taken up
  again as it was.

  Input:
    KEYS[1] the host's record key (hash {id, state, slots, busy, startedAt, seenAt, containment, pool,
            network, filesystem, cpus, proxy}; expires)
    KEYS[2] the worker registry index (sorted set: host id by when its heartbeat runs out, epoch ms)
    KEYS[3] the capacity hash {total, c:<workerId> = the host's share}
    KEYS[4] the held set of the host's pool (sorted set: session id by when its hold runs out, epoch ms)
    KEYS[5] the host leases (sorted set: lease token by when the lease runs out, epoch ms)
    KEYS[6] the sessions registered under this host's lease (hash: session id → user id)
    KEYS[7] the loss guard of the {workers} slot (hash, see includes/lossGuard): a new lease records its
            time to live there when longer than any before (the wait after a loss)
    KEYS[8] the host's nudges (set of user ids whose session changed, e.g. a stop: posted beside the host
            channel's message, so that one lost on the channel still arrives with the next heartbeat)

    ARGV[1] worker host id
    ARGV[2] slots, sessions the host runs at once
    ARGV[3] slots in use
    ARGV[4] when the host started, epoch ms
    ARGV[5] record time to live, milliseconds
    ARGV[6] 1 to publish, 0 to withdraw the host (clean shutdown)
    ARGV[7] the sessions the host runs (ids, comma-separated; may be empty)
    ARGV[8] the sessions it ended since its last heartbeat (ids, comma-separated; may be empty)
    ARGV[9] how the host keeps a session's processes inside it: 'namespace' or 'group' (anything else,
            e.g. '', is recorded as 'group')
    ARGV[10] the pool the host serves
    ARGV[11] the host's lease token ('' when the host keeps no lease)
    ARGV[12] the lease's time to live, milliseconds
    ARGV[13] '1' when the token is new (the host's first heartbeat with it), '' otherwise
    ARGV[14] sessions to register under the lease (`<session id>=<user id>`, comma-separated; may be empty)
    ARGV[15] '1' when ARGV[7] names every session the host runs (a periodic heartbeat), '2' the same and
             the registrations are to be checked whatever their number (every tenth), '' otherwise
    ARGV[16] what the host's sessions reach on the network: 'none', 'egress' or 'host' (anything else,
             e.g. '', is recorded as 'host')
    ARGV[17] what they see of the host's files: 'private' or 'shared' (anything else is recorded as 'shared')
    ARGV[18] the CPUs one session may use at most, a number above 0 ('' or anything else: no cap,
             recorded as '')
    ARGV[19] the loss guard's lease when no claim told the slot one, milliseconds (see includes/lossGuard)
    ARGV[20] the loss guard's slack on top of that lease in its wait after a loss, milliseconds
    ARGV[21] where API processes reach the host's session proxy listener (`host:port`; '' for none)

  Output:
    {1, now (epoch ms), state ('active' | 'draining' | 'withdrawn'), lease ('held' | 'lost' | ''), nudged}
      published or withdrawn; `held`: the lease holds ARGV[12] from now and ARGV[14] are registered under
      it; `lost`: it ran out (or was ended), nothing was registered, and the token is not to be used again;
      `nudged`: the user ids of the host's nudges, taken (an empty list when withdrawn);
    gone: with ARGV[15], the sessions registered under the lease that the host does not run
      (`<session id>=<user id>`; looked for when more are registered than it runs, or ARGV[15] is '2'):
      their registrations and holds are dropped, and the host ends their records (sweepSession)
]]
local rcall = redis.call
local recordKey = KEYS[1]
local indexKey = KEYS[2]
local capacityKey = KEYS[3]
local heldKey = KEYS[4]
local workerId = ARGV[1]
local slots = tonumber(ARGV[2])
local busy = tonumber(ARGV[3])
local startedAt = ARGV[4]
local ttlMs = tonumber(ARGV[5])
local publish = ARGV[6] == '1'
local running = ARGV[7]
local ended = ARGV[8]
local containment = ARGV[9]
if containment ~= 'namespace' then containment = 'group' end
local pool = ARGV[10]
local network = ARGV[16]
if network ~= 'none' and network ~= 'egress' then network = 'host' end
local filesystem = ARGV[17]
if filesystem ~= 'private' then filesystem = 'shared' end
local proxy = ARGV[21] or ''
local cpus = ARGV[18]
if not (tonumber(cpus) and tonumber(cpus) > 0) then cpus = '' end
local leasesKey = KEYS[5]
local registeredKey = KEYS[6]
local token = ARGV[11]
local leaseMs = tonumber(ARGV[12])
local guardLeaseMs, guardSlackMs = tonumber(ARGV[19]), tonumber(ARGV[20])

--- @include "includes/nowMs"
--- @include "includes/capacity"
--- @include "includes/lossGuard"

local now = nowMs()
pruneCapacity(indexKey, capacityKey, heldKey, now)
removeAll(heldKey, ended)
if token ~= '' then eachChunk(ended, function(ids) rcall('HDEL', registeredKey, unpack(ids)) end) end
if not publish then
  removeAll(heldKey, running)
  if token ~= '' then
    rcall('ZREM', leasesKey, token)
    rcall('DEL', registeredKey)
  end
  setContribution(capacityKey, workerId, 0, pool)
  rcall('DEL', recordKey)
  rcall('ZREM', indexKey, workerId)
  rcall('DEL', KEYS[8])
  return { 1, now, 'withdrawn', '', {}, {} }
end
local previous = rcall('HMGET', recordKey, 'state', 'startedAt')
local state = 'active'
if previous[1] == 'draining' and previous[2] == startedAt then state = 'draining' end
rcall('HSET', recordKey, 'id', workerId, 'state', state, 'slots', slots, 'busy', busy, 'startedAt', startedAt,
  'seenAt', now, 'containment', containment, 'pool', pool, 'network', network, 'filesystem', filesystem, 'cpus', cpus,
  'proxy', proxy)
rcall('PEXPIRE', recordKey, ttlMs)
rcall('ZADD', indexKey, now + ttlMs, workerId)
scoreAll(heldKey, now + ttlMs, running)
if state == 'active' then
  setContribution(capacityKey, workerId, slots, pool)
else
  setContribution(capacityKey, workerId, busy, pool)
end
local lease = ''
local gone = {}
if token ~= '' then
  local expiresAt = tonumber(rcall('ZSCORE', leasesKey, token))
  local holds
  if expiresAt and expiresAt > now then
    holds = true
  elseif not expiresAt and ARGV[13] == '1' then
    -- A new lease: the slot's guard learns the longest lease in use, the wait after a loss.
    lossGuardLease(KEYS[7], lossGuard(KEYS[7], now, guardLeaseMs, guardSlackMs), leaseMs)
    holds = true
  else
    -- Run out, or gone: lost unless Redis may have lost the writes that renewed it (the guard still waits,
    -- and no sweep has ended anything of it since).
    holds = now < lossGuard(KEYS[7], now, guardLeaseMs, guardSlackMs).untilMs
  end
  if holds then
    rcall('ZADD', leasesKey, now + leaseMs, token)
    eachChunk(ARGV[14], function(entries)
      local args = {}
      for i = 1, #entries do
        local sessionId, userId = string.match(entries[i], '^([^=]+)=(.+)$')
        if sessionId then
          args[#args + 1] = sessionId
          args[#args + 1] = userId
        end
      end
      if #args > 0 then rcall('HSET', registeredKey, unpack(args)) end
    end)
    -- What Redis says the host runs is put right from the host's own full list: a session registered
    -- here that the host does not run (its end was in writes Redis lost, or replayed from before it)
    -- gives its hold back now, not when the hold runs out. (The sessions it ended are unregistered above,
    -- and it runs every session it registers until then: registered ones never outnumber those it runs
    -- but for this; every tenth periodic heartbeat looks whatever the numbers.)
    local runs, count = {}, 0
    if ARGV[15] ~= '' then
      for id in string.gmatch(running, '[^,]+') do
        runs[id] = true
        count = count + 1
      end
    end
    if ARGV[15] == '2' or (ARGV[15] == '1' and rcall('HLEN', registeredKey) > count) then
      local registered = rcall('HGETALL', registeredKey)
      local ids = {}
      for i = 1, #registered, 2 do
        if not runs[registered[i]] then
          ids[#ids + 1] = registered[i]
          gone[#gone + 1] = registered[i] .. '=' .. registered[i + 1]
        end
      end
      if #ids > 0 then
        local list = table.concat(ids, ',')
        removeAll(heldKey, list)
        eachChunk(list, function(chunk) rcall('HDEL', registeredKey, unpack(chunk)) end)
      end
    end
    lease = 'held'
  else
    lease = 'lost'
  end
end
local nudged = rcall('SMEMBERS', KEYS[8])
if #nudged > 0 then rcall('DEL', KEYS[8]) end
return { 1, now, state, lease, nudged, gone }
