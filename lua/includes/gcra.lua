--[[
  Generic cell rate algorithm (as in redis-cell), split in a side-effect-free check and a commit,
  so that a caller can check several conditions before it writes anything.
  The theoretical arrival time (TAT) is the key's expiry: the key lives exactly while the TAT is in the
  future, and its time to live (PTTL) is TAT - now, by Redis's own clock. So a check reads one number
  (PTTL) and needs no TIME, and a commit moves the expiry (PEXPIRE, or SET PX when there is no key yet).
  The value is '1' and nothing reads it. Only this file knows that layout: a caller that keeps a TAT to
  put back later keeps it as an instant (gcraTatAt) and puts it back with gcraRestore.
  A burst of `burst` calls is allowed at once, then one per `intervalMs`.
]]

-- Returns allowed (boolean); tat, the TAT - now (ms; 0 when the quota is full); newTat, the TAT - now
-- once this call is counted; remaining calls; retryAfterMs (0 when allowed). Writes nothing.
local function gcraCheck(key, intervalMs, burst)
  local tat = rcall('PTTL', key)
  if tat < 0 then tat = 0 end
  local newTat = tat + intervalMs
  local allowAt = newTat - burst * intervalMs
  if allowAt > 0 then return false, tat, newTat, 0, allowAt end
  return true, tat, newTat, math.floor(-allowAt / intervalMs), 0
end

-- Counts the call gcraCheck allowed: the TAT moves to newTat (tat and newTat as gcraCheck answered).
local function gcraCommit(key, tat, newTat)
  if tat > 0 then
    rcall('PEXPIRE', key, newTat)
  else
    rcall('SET', key, '1', 'PX', newTat)
  end
end

-- The TAT as an instant (epoch ms), given gcraCheck's tat (TAT - now) and the current time; nil when the
-- quota is full (no TAT in the future).
local function gcraTatAt(tat, now)
  if tat > 0 then return now + tat end
  return nil
end

-- Puts the TAT back to tatAt (epoch ms, as gcraTatAt answered; nil or not after now: the quota full).
local function gcraRestore(key, tatAt, now)
  if tatAt and tatAt > now then
    rcall('SET', key, '1', 'PX', tatAt - now)
  else
    rcall('DEL', key)
  end
end
