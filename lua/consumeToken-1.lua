--[[
  Consumes a one-time token: returns its data and deletes it in the same step, so exactly one of any
  number of simultaneous callers gets it. Unknown, expired and already used tokens look the same.

  Input:
    KEYS[1] token key (hash {m = metadata JSON, l = lifetime ms or '', e = expiresAt epoch ms})

  Output:
    {1, metadata JSON, lifetime ms or '', expiresAt} consumed
    {-1} token_invalid: unknown, expired or already used
]]
local rcall = redis.call
local tokenKey = KEYS[1]

local token = rcall('HMGET', tokenKey, 'm', 'l', 'e')
if not token[1] then return { -1 } end
rcall('DEL', tokenKey)
return { 1, token[1], token[2], tonumber(token[3]) }
