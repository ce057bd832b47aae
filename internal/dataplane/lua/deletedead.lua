-- deletedead.lua: delete one dead job for good.
--
-- KEYS[1]  dead ZSET
-- KEYS[2]  job HASH
-- ARGV[1]  the job id
--
-- Returns  1 when the job was dead and is deleted, 0 when it is not dead
--          (waiting, in flight, unknown: nothing is touched).
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
