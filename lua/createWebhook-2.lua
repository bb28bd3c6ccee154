--[[
  Keeps a new webhook endpoint, stamped with its creation time from the Redis clock, and bumps the
  endpoints' version (so dispatchers read the endpoints again). The time is Redis TIME, so "the events
  after a webhook's creation" means the same on every API process whatever their own clocks say. On one
  Redis it is the clock the session events carry; on a cluster it is this slot's master's, and an event's
  is its own slot's master's, so the boundary is only as sharp as those clocks agree.

  Input:
    KEYS[1] the webhooks' endpoints (hash: id -> JSON)
    KEYS[2] the endpoints' version (counter)

    ARGV[1] webhook id
    ARGV[2] the endpoint, a JSON object without its createdAt (the script adds it as its last member)

  Output:
    {1, createdAt (epoch ms)}
]]
local rcall = redis.call
local endpointsKey = KEYS[1]
local versionKey = KEYS[2]

--- @include "includes/nowMs"

local createdAt = nowMs()
local json = string.sub(ARGV[2], 1, -2) .. ',"createdAt":' .. string.format('%.0f', createdAt) .. '}'
rcall('HSET', endpointsKey, ARGV[1], json)
rcall('INCR', versionKey)
return { 1, createdAt }
