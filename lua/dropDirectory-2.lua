--[[
  Drops a cluster slot from the session list's directory, only when its entry is still of the generation
  whose `listed` key unlistSlot-2 deleted (a slot entered again since keeps its new entry).

  Input:
    KEYS[1] the directory (sorted set: slot by slot number)
    KEYS[2] the directory's generations (hash: slot → generation of its entry)

    ARGV[1] the slot, 0 to 16383
    ARGV[2] the generation its `listed` key held

  Output:
    {1} dropped
    {-4} stale: the slot was entered again since (or is not in the directory); nothing changed
]]
local rcall = redis.call
local directoryKey = KEYS[1]
local generationsKey = KEYS[2]
local slot = ARGV[1]
local generation = ARGV[2]

if rcall('HGET', generationsKey, slot) ~= generation then return { -4 } end
rcall('HDEL', generationsKey, slot)
rcall('ZREM', directoryKey, slot)
return { 1 }
