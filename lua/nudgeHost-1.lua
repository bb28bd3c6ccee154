--[[
  Posts a nudge to a worker host: the user's session changed (a stop), beside the message on the host's
  channel, so that a message lost there still reaches the host with its next heartbeat (heartbeatWorker
  takes the nudges). The nudges of a host that never takes them go after their time to live.

  Input:
    KEYS[1] the host's nudges (set of user ids)

    ARGV[1] user id
    ARGV[2] time to live of the host's nudges, milliseconds

  Output:
    {1} posted
]]
local rcall = redis.call
local nudgesKey = KEYS[1]

rcall('SADD', nudgesKey, ARGV[1])
rcall('PEXPIRE', nudgesKey, ARGV[2])
return { 1 }
