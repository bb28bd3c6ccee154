--[[
  Keeps the sweeping turn for its holder (compare-and-expire), so that one API process at a time sweeps
  the live index and keeps doing so: a process that takes the turn over first reads all 16384 slots'
  indexes, then only the slots it learns of from the event channel, so a stable holder is what keeps
  the sweep cheap. The others take the turn with SET NX PX once it has expired.

  Input:
    KEYS[1] turn key (string: the holder's id)

    ARGV[1] the holder's id
    ARGV[2] time to live of the turn, ms

  Output:
    {1} renewed
    {-7} lease_lost: the turn expired, or another sweeper holds it
]]
local rcall = redis.call
local turnKey = KEYS[1]

if rcall('GET', turnKey) ~= ARGV[1] then return { -7 } end
rcall('PEXPIRE', turnKey, ARGV[2])
return { 1 }
