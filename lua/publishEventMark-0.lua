--[[
  Publishes a watermark on the reader's own mark channel: this master's Redis TIME, tagged with the
  reader's round. Run on every master (it touches no key, so it runs wherever it is sent). Whatever
  this master published before it reaches the reader's subscription before the mark (one link, one
  order), and every event this master writes after it carries an entry id of at least this time: once
  each master's mark of a round has arrived, the reader holds every event older than the smallest of
  their times.

  Input:
    ARGV[1] the reader's mark channel (`<prefix>:events:mark:<reader>`), subscribed with the event channel
    ARGV[2] round tag (chosen by the reader)

  Output:
    {1, now (epoch ms)} published
]]
local rcall = redis.call
local channel = ARGV[1]
local round = ARGV[2]

--- @include "includes/nowMs"

local now = nowMs()
rcall('PUBLISH', channel, 'mark ' .. round .. ' ' .. now)
return { 1, now }
