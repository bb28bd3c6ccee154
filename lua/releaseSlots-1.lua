--[[
  Gives back the slots held for sessions that ended or were never handed on.

  Input:
    KEYS[1] the held set (sorted set: session id by when its hold runs out, epoch ms)

    ARGV[1] session ids, comma-separated

  Output:
    {1, holds given back}
]]
local rcall = redis.call
local heldKey = KEYS[1]
local ids = ARGV[1]

local released = 0
for id in string.gmatch(ids, '[^,]+') do released = released + rcall('ZREM', heldKey, id) end
return { 1, released }
