--[[
  Reads a page of a session's kept output, oldest first, after a line id, and says whether the
  session is still live (so a follower knows whether more can come).

  Input:
    KEYS[1] the session's output stream (entries {s = 'o'|'e', l = line})
    KEYS[2] the session's output record (hash {d = bytes dropped so far})
    KEYS[3] the user's session key (hash: the live session)

    ARGV[1] session id
    ARGV[2] read after this line id ('' or '-' for from the oldest kept); exclusive
    ARGV[3] most lines to read, at least 1

  Output:
    {1, live (1|0), dropped bytes, more (1|0), id, stream, line, id, stream, line, ...}
    {-10} no_session: neither output nor a live session with this id is kept
]]
local rcall = redis.call
local streamKey = KEYS[1]
local recordKey = KEYS[2]
local sessionKey = KEYS[3]
local sessionId = ARGV[1]
local after = ARGV[2]
local limit = tonumber(ARGV[3])

local s = rcall('HMGET', sessionKey, 'id', 'state')
local live = (s[1] == sessionId and s[2] ~= false) and 1 or 0
local dropped = rcall('HGET', recordKey, 'd')
if dropped == false and live == 0 and rcall('EXISTS', streamKey) == 0 then return { -10 } end

local start = (after == '' or after == '-') and '-' or ('(' .. after)
local entries = rcall('XRANGE', streamKey, start, '+', 'COUNT', limit + 1)
local more = #entries > limit and 1 or 0
local reply = { 1, live, tonumber(dropped or '0'), more }
for i = 1, math.min(#entries, limit) do
  local entry = entries[i]
  -- appendOutput writes every entry as {s, <stream>, l, <line>}
  reply[#reply + 1] = entry[1]
  reply[#reply + 1] = entry[2][2]
  reply[#reply + 1] = entry[2][4]
end
return reply
