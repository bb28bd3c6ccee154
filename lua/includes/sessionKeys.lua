--[[
  The `ending` key group of a user's session (keys.ts: `ending`), bound once per script as a table:
  session (hash: the live session), lease (hash {o, f, d}), history (list of JSON, newest first),
  liveIndex (the live-session index of the user's slot), ended (the recent endings of the user's slot),
  events (the event stream of the user's slot), ids (the session ids of the user's slot: hash, session id →
  user id, for the sessions live or in their users' histories), and beside them channel, the event channel
  the endings publish on (a channel, not a key: the script's caller passes it as an argument). settleSession
  and endSession take it whole.
]]
local function sessionKeys(keys, channel)
  return { session = keys[1], lease = keys[2], history = keys[3], liveIndex = keys[4], ended = keys[5],
    events = keys[6], ids = keys[7], channel = channel }
end
