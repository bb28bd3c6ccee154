--[[
  A worker host appends a batch of a session's output lines to the session's output stream, keeps only
  the newest lines (exact trim, once per batch), records the bytes dropped so far, sets how long both
  keys are kept, and tells followers on the session's output channel that lines were added. The entry
  ids (Redis TIME, `<ms>-<seq>`) are the lines' ids and times. Called with no lines when the session
  starts (so its output exists, empty) and when it ends (to keep it for the retention from then).

  Input:
    KEYS[1] the session's output stream (entries {s = 'o'|'e', l = line})
    KEYS[2] the session's output record (hash {d = bytes dropped so far})

    ARGV[1] lines kept, newest first (LOG_KEEP_LINES), at least 1
    ARGV[2] how long both keys are kept from now, milliseconds
    ARGV[3] bytes of output dropped so far (the host's running total)
    ARGV[4] the session's output channel ('' for none)
    ARGV[5], ARGV[6], ... pairs of stream ('o' stdout | 'e' stderr) and line

  Output:
    {1, last id ('' when no line was added)}
]]
local rcall = redis.call
local streamKey = KEYS[1]
local recordKey = KEYS[2]
local keepLines = tonumber(ARGV[1])
local keepForMs = tonumber(ARGV[2])
local dropped = ARGV[3]
local channel = ARGV[4]

local last = ''
for i = 5, #ARGV, 2 do
  last = rcall('XADD', streamKey, '*', 's', ARGV[i], 'l', ARGV[i + 1])
end
if last ~= '' then
  rcall('XTRIM', streamKey, 'MAXLEN', keepLines)
  rcall('PEXPIRE', streamKey, keepForMs)
end
rcall('HSET', recordKey, 'd', dropped)
rcall('PEXPIRE', recordKey, keepForMs)
if last ~= '' then
  if channel ~= '' then rcall('PUBLISH', channel, last) end
elseif rcall('EXISTS', streamKey) == 1 then
  rcall('PEXPIRE', streamKey, keepForMs)
end
return { 1, last }
