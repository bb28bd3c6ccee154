--[[
  Moves the webhook dispatch cursor forward, for the holder of the dispatch lease only: the write of a
  dispatcher whose lease ran out, was released or was taken over (its fence is not the lease's) is
  refused, and so is an event id at or before the cursor, so the cursor never moves back. Event ids
  are compared as numbers, part by part (ms, then seq, then slot), whatever their digit counts.

  Input:
    KEYS[1] the dispatch lease (hash {o = owner, f = fence, d = hard deadline epoch ms}; expires with the lease)
    KEYS[2] the dispatch cursor (string: an event id `<ms>-<seq>-<slot>`)

    ARGV[1] the caller's fence: the one its lease was acquired with
    ARGV[2] the new cursor: an event id `<ms>-<seq>-<slot>`, decimal digits

  Output:
    {1} moved
    {-7} lease_lost: the lease is not held with this fence (expired, released, or taken over)
    {-4, cursor} stale: the cursor is already at or past this event id, and stays there
    {-11} bad_argument: ARGV[2] is not an event id
]]
local rcall = redis.call
local leaseKey = KEYS[1]
local cursorKey = KEYS[2]
local fence = ARGV[1]
local eventId = ARGV[2]

local ID = '^(%d+)-(%d+)-(%d+)$'

-- Compares two strings of decimal digits as the numbers they are: -1, 0 or 1.
local function compareDecimal(a, b)
  a = string.match(a, '^0*(%d-)$')
  b = string.match(b, '^0*(%d-)$')
  if #a ~= #b then return #a < #b and -1 or 1 end
  if a == b then return 0 end
  return a < b and -1 or 1
end

local ms, seq, slot = string.match(eventId, ID)
if ms == nil then return { -11 } end

local held = rcall('HGET', leaseKey, 'f')
if not held or held ~= fence then return { -7 } end

local current = rcall('GET', cursorKey)
if current then
  local cms, cseq, cslot = string.match(current, ID)
  -- A cursor that is not an event id (written by hand) is replaced.
  if cms ~= nil then
    local order = compareDecimal(ms, cms)
    if order == 0 then order = compareDecimal(seq, cseq) end
    if order == 0 then order = compareDecimal(slot, cslot) end
    if order <= 0 then return { -4, current } end
  end
end
rcall('SET', cursorKey, eventId)
return { 1 }
