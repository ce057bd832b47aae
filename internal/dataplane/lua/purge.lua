-- purge.lua: delete dead jobs that died before a given time.
--
-- KEYS[1]  dead ZSET
-- KEYS[2]  job HASH
-- KEYS[3]  taken ZSET (the uniqueness window, docs/design.md §4.2.1)
-- ARGV[1]  cut-off, Unix ms: jobs that died at or before it go
-- ARGV[2]  the most jobs to delete in this call
-- ARGV[3]  the topic's uniqueness window in ms, 0 for none: a deleted job
--          whose window (from its death) has not ended keeps its id taken
--          until then (score × 4 + 2, purged); ids whose window ended
--          are trimmed
-- KEYS[4]  prio HASH (id -> priority): a deleted job's field goes
-- KEYS[5]  okey HASH (id -> its ordering key, ordering.lua): a deleted
--          job's field goes
--
-- Returns  how many jobs were deleted (the caller loops while it gets ARGV[2]).
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]), 'WITHSCORES')
local window = tonumber(ARGV[3])
local floor = nil
if window > 0 then
  local t = redis.call('TIME')
  floor = (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + 1) * 4
end
for i = 1, #ids, 2 do
  local id = ids[i]
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[4], id)
  redis.call('HDEL', KEYS[5], id)
  if floor then
    local score = (tonumber(ids[i + 1]) + window) * 4 + 2
    if score >= floor then redis.call('ZADD', KEYS[3], score, id) end
  end
end
if floor and #ids > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', floor - 1)
end
return #ids / 2
