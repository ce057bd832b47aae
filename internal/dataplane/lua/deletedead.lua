-- deletedead.lua: delete one dead job for good.
--
-- KEYS[1]  dead ZSET
-- KEYS[2]  job HASH
-- KEYS[3]  taken ZSET (the uniqueness window, docs/design.md §4.2.1)
-- ARGV[1]  the job id
-- ARGV[2]  the topic's uniqueness window in ms, 0 for none: as purge.lua,
--          the id stays taken until its death + the window; ids whose
--          window ended are trimmed
-- KEYS[4]  prio HASH (id -> priority): the job's field goes
-- KEYS[5]  okey HASH (id -> its ordering key, ordering.lua): the job's
--          field goes
--
-- Returns  1 when the job was dead and is deleted, 0 when it is not dead
--          (waiting, in flight, unknown: nothing is touched).
local died = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not died then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
local window = tonumber(ARGV[2])
if window > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local score = (tonumber(died) + window) * 4 + 2
  if score >= (now + 1) * 4 then redis.call('ZADD', KEYS[3], score, ARGV[1]) end
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', (now + 1) * 4 - 1)
end
return 1
