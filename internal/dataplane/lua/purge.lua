-- purge.lua: delete dead jobs that died before a given time.
--
-- KEYS[1]  dead ZSET
-- KEYS[2]  job HASH
-- ARGV[1]  cut-off, Unix ms: jobs that died at or before it go
-- ARGV[2]  the most jobs to delete in this call
--
-- Returns  how many jobs were deleted (the caller loops while it gets ARGV[2]).
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
end
return #ids
