-- stats.lua: counts of one topic, cheap enough for every scrape (no scans).
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET
-- KEYS[3]  dead ZSET
-- KEYS[4..6] pri ZSETs of priority 1-3 (waiting jobs of raised priority)
--
-- Returns  {now, due total, due now, in flight, dead, earliest due (-1 if none),
--           waiting of priority 1, 2, 3}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local first = -1
if head[2] then first = tonumber(head[2]) end
return {now,
  redis.call('ZCARD', KEYS[1]),
  redis.call('ZCOUNT', KEYS[1], '-inf', now),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
  first,
  redis.call('ZCARD', KEYS[4]),
  redis.call('ZCARD', KEYS[5]),
  redis.call('ZCARD', KEYS[6])}
