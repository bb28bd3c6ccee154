--[[
  Records a webhook delivery attempt in the webhook's log, newest first, capped, only while the webhook
  exists (an attempt that ends after its webhook was deleted leaves nothing behind).

  Input:
    KEYS[1] the webhooks' endpoints (hash: id -> JSON)
    KEYS[2] the webhook's delivery log (list of JSON, newest first)

    ARGV[1] webhook id
    ARGV[2] the attempt, JSON
    ARGV[3] attempts kept

  Output:
    {1, recorded (1|0)}
]]
local rcall = redis.call
local endpointsKey = KEYS[1]
local logKey = KEYS[2]

if rcall('HEXISTS', endpointsKey, ARGV[1]) == 0 then return { 1, 0 } end
rcall('LPUSH', logKey, ARGV[2])
rcall('LTRIM', logKey, 0, tonumber(ARGV[3]) - 1)
return { 1, 1 }
