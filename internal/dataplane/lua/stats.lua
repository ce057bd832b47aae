-- stats.lua: counts of one topic, cheap enough for every scrape (no scans).
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET
-- KEYS[3]  dead ZSET
-- KEYS[4..6] pri ZSETs of priority 1-3 (waiting jobs of raised priority)
-- KEYS[7]  oq ZSET: the jobs parked behind their ordering key's holder
--          (ordering.lua), in due at 2^51 + their due time
--
-- Returns  {now, due total, due now, in flight, dead, earliest due (-1 if none),
--           waiting of priority 1, 2, 3, parked behind a key}
--          earliest due: of the jobs a claim can take (not parked)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(2251799813685248', 'WITHSCORES', 'LIMIT', 0, 1)
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
  redis.call('ZCARD', KEYS[6]),
  redis.call('ZCARD', KEYS[7])}
