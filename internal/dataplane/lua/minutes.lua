-- minutes.lua: read a topic's per-minute hashes of several hours at once
-- (they share the topic's hash tag, so one call reads them all).
--
-- KEYS[1..n]  min HASHes, one per epoch hour, oldest first
--
-- Returns  one flat HGETALL reply per key ({field, value, ...}; empty for
--          an hour that has none), in KEYS' order.
local out = {}
for i, k in ipairs(KEYS) do
  out[i] = redis.call('HGETALL', k)
end
return out
