--[[
  Enters a cluster slot in the session list's directory, the sorted set of the slots that may hold live
  sessions (GET /v1/sessions walks it, so a page costs what its sessions cost, not 16384 slots). Each
  entry has a generation, taken from a counter; the caller then sets the slot's `listed` key to it, and
  only then can the slot admit (admit-13). A slot is dropped only by its own generation (dropDirectory-2),
  after its `listed` key was deleted for it (unlistSlot-2), so a slot whose `listed` key exists is always
  in the directory.

  Input:
    KEYS[1] the directory (sorted set: slot by slot number)
    KEYS[2] the directory's generations (hash: slot → generation of its entry)
    KEYS[3] the generation counter (integer)

    ARGV[1] the slot, 0 to 16383

  Output:
    {1, generation} entered (or entered again, with a new generation)
]]
local rcall = redis.call
local directoryKey = KEYS[1]
local generationsKey = KEYS[2]
local counterKey = KEYS[3]
local slot = ARGV[1]

local generation = rcall('INCR', counterKey)
rcall('HSET', generationsKey, slot, generation)
rcall('ZADD', directoryKey, slot, slot)
return { 1, generation }
