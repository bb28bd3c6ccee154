--[[
  Takes a cluster slot with no live session out of the session list: deletes its `listed` key, only when
  the slot's live-session index is empty and the key still holds the generation the caller saw. The
  caller then drops the slot's directory entry of that generation (dropDirectory-2). Until the slot is
  entered again, admit-13 admits nothing there, so no live session is ever in a slot the directory lacks.

  Input:
    KEYS[1] the live-session index of the slot (sorted set)
    KEYS[2] the slot's `listed` key (string: its directory entry's generation)

    ARGV[1] the generation the caller saw

  Output:
    {1} unlisted: drop the directory entry of that generation next
    {-4} stale: the slot has live sessions, or was entered again; nothing changed
]]
local rcall = redis.call
local liveIndexKey = KEYS[1]
local listedKey = KEYS[2]
local generation = ARGV[1]

if rcall('ZCARD', liveIndexKey) > 0 or rcall('GET', listedKey) ~= generation then return { -4 } end
rcall('DEL', listedKey)
return { 1 }
