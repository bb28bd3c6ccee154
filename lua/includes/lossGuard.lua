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

  When the process changed: a restart takes over from its own start (`since`: the end of the second
  it started in, never later than now); a replica promoted in its lifetime (INFO replication's second_repl_offset is set) from
  now, the earliest it can be sure of. A guard that does not exist yet (a slot never used, or one whose
  first use was itself lost) is started as it is, without a wait.

  Costs one INFO server per call (2.5 to 6 us of Redis time, as much as the rest of a small script);
  INFO replication, the parsing of the uptime and the writes only when the process changed.
]]
local LOSS_DEFAULT_LEASE_MS = 15000
local LOSS_MARGIN_MS = 1000

-- An integer as Redis stores it: Lua's own formatting (%.14g) would round one of 15 digits or more.
local function integerText(n)
  return string.format('%.0f', n)
end

-- Returns { since, untilMs, floor } for a slot whose guard is at `guardKey`, at `now` (epoch ms).
local function lossGuard(guardKey, now)
  local info = rcall('INFO', 'server')
  -- A plain find: a pattern scan of the whole section costs Redis as much again as INFO itself.
  local _, runAt = string.find(info, 'run_id:', 1, true)
  local run = string.sub(info, runAt + 1, runAt + 40)
  local g = rcall('HMGET', guardKey, 'run', 'since', 'until', 'floor', 'lease')
  local since, untilMs, floor = tonumber(g[2]) or 0, tonumber(g[3]) or 0, tonumber(g[4]) or 0
  local lease = tonumber(g[5])
  if g[1] == run then return { since = since, untilMs = untilMs, floor = floor, lease = lease } end
  if not g[1] then
    rcall('HSET', guardKey, 'run', run)
    return { since = 0, untilMs = 0, floor = 0 }
  end
  local promoted = string.match(rcall('INFO', 'replication'), 'second_repl_offset:(%-?%d+)') ~= '-1'
  local tookOver = now
  if not promoted then
    -- uptime_in_seconds is whole seconds of the clock since the second the process started in: the end
    -- of that second is the earliest instant sure to be no earlier than the start.
    local uptime = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
    tookOver = math.min(now, (math.floor(now / 1000) - uptime + 1) * 1000)
  end
  since = math.max(since, tookOver)
  untilMs = math.max(untilMs, tookOver + (lease or LOSS_DEFAULT_LEASE_MS) + LOSS_MARGIN_MS)
  floor = math.max(floor, now)
  rcall('HSET', guardKey, 'run', run, 'since', since, 'until', untilMs, 'floor', integerText(floor))
  return { since = since, untilMs = untilMs, floor = floor, lease = lease }
end

-- A claim records the longest lease in use in the slot (`guard` as lossGuard returned it): the wait
-- after the next loss.
local function lossGuardLease(guardKey, guard, leaseMs)
  if not guard.lease or guard.lease < leaseMs then rcall('HSET', guardKey, 'lease', leaseMs) end
end
