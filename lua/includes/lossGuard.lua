--[[
  The loss guard of a slot: has the Redis process that runs this script possibly lost writes it had
  acknowledged for the slot's users, and if so, what still holds. Redis acknowledges writes it can still
  lose (a crash under AOF everysec, a restart from an older snapshot, a failover to a replica that lacked
  the last writes); each of these leaves the slot served by another process than the one that wrote its
  guard: another `run_id`. Any other process is taken as one that may have lost writes, a clean restart
  too: nothing Redis keeps tells the two apart.

  The guard (a hash in the slot, written when the process changes, and when a claim brings a longer lease
  than any it has seen):
    run    the run_id of the process that last checked it
    since  epoch ms: what a process that may have lost writes took over from; tokens issued and
           sessions admitted before it may have been spent or started in the lost writes
    until  epoch ms: admissions wait until then; every session admitted before the loss has been
           stopped by its host by then (a host stops a session within its lease of its last renewal,
           and that renewal reached the process that was lost, before `since`)
    floor  fences handed out from now on exceed it: the Redis clock at the check, in milliseconds (a
           user gets fewer fences in a millisecond's worth of time than that, so it is above every
           fence handed out before, whether or not the fence counter survived; 13 digits, exact in
           Lua's numbers and in cjson's)
    lease  the longest session lease (ms) claimed in the slot: the wait after a loss
    mark   the process's mark when `run` was last confirmed by INFO: its LASTSAVE (epoch s), and on a
           Cluster `:` and its node id; kept only when it tells the process from any other (see below)

  The process's identity is its run_id, which only INFO server tells (2.5 to 6 us of Redis, as much as
  the rest of a small script). The mark is what lets a call skip it: while the mark read now equals the
  one stored, the process is the one that confirmed `run`. Why that holds:
    - A restart. LASTSAVE is the second the process started in, or of a later save. A mark is stored only
      when its LASTSAVE is at least 2 s old, so the process that stored it was alive in
      a later second; a process started after that one has a LASTSAVE of a later second: another mark.
    - A promoted replica on a Cluster: another node id.
    - A promoted replica of a standalone Redis: its LASTSAVE may fall in the same second as its master's
      (both started together, never saved). So a standalone process keeps a mark only while it has no
      replication backlog (INFO replication: no replica attached within repl-backlog-ttl, an hour by
      default), so that a replica can only attach after it by a full resynchronisation. What is left: a
      replica attached that way after the master kept the mark, whose own start or last save fell in the
      very second of the master's, and promoted in its place behind the same address (see
      docs/failure-modes.md).
  A mark that differs (a save, a restart, another node) sends the call to INFO once; a save changes
  nothing else.

  Stamps: a token, and the session it admits, carry what the guard said when it let them through, with
  the mark of the process it said it on: a session `<mark>|<lease>`, a token the same and `|<floor>` when
  the slot has a fence floor. While the process's mark is still that one, the guard has not changed but
  for its lease (`since`, `until` and `floor` change only when the process does; a token issued on this
  process is not older than its `since`), so the script that reads the token or the session anyway need
  not read the guard: admit (lossStampFloor) and claimSession (lossStampCovers). A stamp is made only once
  the wait is over (`until` passed). `lease` only grows, so a stamp's may be behind the guard's, never
  ahead: a claim whose lease is not the one its stamp says asks the guard.

  When the process changed: a restart takes over from its own start (`since`: the end of the second
  it started in, never later than now); a process whose INFO replication has a second_repl_offset (a
  promoted replica, or one started from a snapshot that carried replication state) from now, the
  earliest it can be sure of. A guard that does not exist yet (a
  slot never used, or one whose first use was itself lost: nothing tells the two apart) is started the
  same way on a process that may have lost writes, one promoted or started from data on disk: a wait from
  its takeover (a promoted one's: now) while it can still matter, and a fence floor in any case. Only a
  process that started from nothing on disk (a new deployment, or one whose every write is gone, which a
  setup with persistence does not allow) starts a guard as it is.
]]
-- Few functions and few upvalues: a script makes each of its local functions anew on every call, with
-- an upvalue for each outer local it uses, on every path, the refusals' too. So what the functions need
-- comes as parameters, and the one number of the guard's own is written where it is used:
--   2      seconds: how far back LASTSAVE must be for a mark to be kept
-- The wait's times are the caller's arguments (every script that includes this takes them, as two ARGV:
-- `lossGuardArgs` in packages/coordinator/src/liveness/constants.ts, where they are named once):
--   defaultLeaseMs  the wait's lease when no claim told the slot one (DEFAULT_LEASE_MS, LEASE_MS's default)
--   slackMs         slack on top of the lease in the wait after a loss (LOSS_WAIT_SLACK_MS, which says why)

-- The mark of the process running this script, in the form of `stored` (a Cluster's has a node id).
local function lossMarkNow(stored)
  local saved = rcall('LASTSAVE')
  if not string.find(stored, ':', 1, true) then return tostring(saved) end
  local node = redis.pcall('CLUSTER', 'MYID')
  if type(node) ~= 'string' then return '' end
  return saved .. ':' .. node
end

-- The guard of the slot at `guardKey`, at `now` (epoch ms), its wait after a loss being its lease (or
-- `defaultLeaseMs`) and `slackMs`: { since, untilMs, floor, lease, stamp, run }, where
-- `stamp` is for a record the guard lets through: a token's (`want` 'token'), a session's ('session'),
-- or none; '' when the process cannot stamp (no mark) or the wait is not over; `run` is the run_id of the
-- process running this script.
local function lossGuard(guardKey, now, defaultLeaseMs, slackMs, want)
  local g = rcall('HMGET', guardKey, 'run', 'since', 'until', 'floor', 'lease', 'mark')
  local since, untilMs, floor = tonumber(g[2]) or 0, tonumber(g[3]) or 0, tonumber(g[4]) or 0
  local lease, mark = tonumber(g[5]), g[6]
  local run = g[1]
  if not mark or mark ~= lossMarkNow(mark) then
    -- The slow way: INFO says which process this is.
    local info = rcall('INFO', 'server')
    -- A plain find: a pattern scan of the whole section costs Redis as much again as INFO itself.
    local _, runAt = string.find(info, 'run_id:', 1, true)
    run = string.sub(info, runAt + 1, runAt + 40)
    local replication
    if g[1] and g[1] ~= run then
      replication = rcall('INFO', 'replication')
      local tookOver = now
      if string.match(replication, 'second_repl_offset:(%-?%d+)') == '-1' then
        -- Not promoted in its lifetime: a restart. uptime_in_seconds is whole seconds of the clock since
        -- the second the process started in: the end of that second is the earliest instant sure to be no
        -- earlier than the start.
        local uptime = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
        tookOver = math.min(now, (math.floor(now / 1000) - uptime + 1) * 1000)
      end
      since = math.max(since, tookOver)
      untilMs = math.max(untilMs, tookOver + (lease or defaultLeaseMs) + slackMs)
      floor = math.max(floor, now)
      rcall('HSET', guardKey, 'run', run, 'since', since, 'until', untilMs, 'floor', string.format('%.0f', floor))
    elseif not g[1] then
      -- No guard: a slot never used, or one whose first use was itself lost. The two look the same, so a
      -- process that may have lost writes (it was promoted, or it started from data on disk) waits as
      -- after a change of process, from its takeover, while sessions admitted in the lost writes may
      -- still run; and its fences start above the Redis clock either way, as the counter may be gone.
      -- A process that started from nothing (no data on disk) lost nothing it could tell: it is new.
      replication = rcall('INFO', 'replication')
      local tookOver
      if string.match(replication, 'second_repl_offset:(%-?%d+)') ~= '-1' then
        tookOver = now
      else
        local persistence = rcall('INFO', 'persistence')
        local keysLoaded = tonumber(string.match(persistence, 'rdb_last_load_keys_loaded:(%d+)'))
        local aofLoaded = tonumber(string.match(persistence, 'aof_base_size:(%d+)')) or 0
        -- (A Redis older than 7.0 does not say what it loaded: taken as one that did.)
        if keysLoaded == nil or keysLoaded > 0 or aofLoaded > 0 then
          local uptime = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
          tookOver = math.min(now, (math.floor(now / 1000) - uptime + 1) * 1000)
        end
      end
      if tookOver then
        since = tookOver
        untilMs = tookOver + defaultLeaseMs + slackMs
        floor = now
        rcall('HSET', guardKey, 'run', run, 'since', since, 'until', untilMs, 'floor', string.format('%.0f', floor))
      else
        rcall('HSET', guardKey, 'run', run)
      end
    end
    -- The mark, when this process's can be told from any other's (see above).
    local saved = rcall('LASTSAVE')
    mark = nil
    if math.floor(now / 1000) - saved >= 2 then
      if string.find(info, 'redis_mode:cluster', 1, true) then
        mark = saved .. ':' .. rcall('CLUSTER', 'MYID')
      else
        replication = replication or rcall('INFO', 'replication')
        if string.find(replication, 'repl_backlog_active:0\r\n', 1, true) then mark = tostring(saved) end
      end
    end
    if mark then
      rcall('HSET', guardKey, 'mark', mark)
    elseif g[6] then
      rcall('HDEL', guardKey, 'mark')
    end
  end
  local stamp = ''
  if want and mark and now >= untilMs then
    stamp = mark .. '|' .. (lease or '')
    if want == 'token' and floor > 0 then stamp = stamp .. '|' .. string.format('%.0f', floor) end
  end
  return { since = since, untilMs = untilMs, floor = floor, lease = lease, stamp = stamp, run = run }
end

-- The fence floor a token's `stamp` (false or '' when it has none) says, and the stamp for the session it
-- admits, when the process running this script made it; nothing when it did not: then ask lossGuard.
local function lossStampFloor(stamp)
  if not stamp or stamp == '' then return nil end
  local head = lossMarkNow(stamp) .. '|'
  if string.sub(stamp, 1, #head) ~= head then return nil end
  local bar = string.find(stamp, '|', #head + 1, true)
  if not bar then return 0, stamp end
  return tonumber(string.sub(stamp, bar + 1)), string.sub(stamp, 1, bar - 1)
end

-- Whether a session's `stamp` was made by the process running this script, with the slot's lease at
-- `leaseText` (a claim's lease in ms, as the text it came in): then its claim needs nothing of the guard.
local function lossStampCovers(stamp, leaseText)
  return stamp and stamp ~= '' and stamp == lossMarkNow(stamp) .. '|' .. leaseText
end

-- A claim records the longest lease in use in the slot (`guard` as lossGuard returned it): the wait
-- after the next loss.
local function lossGuardLease(guardKey, guard, leaseMs)
  if not guard.lease or guard.lease < leaseMs then rcall('HSET', guardKey, 'lease', leaseMs) end
end
