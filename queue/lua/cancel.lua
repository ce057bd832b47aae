-- cancel.lua: remove a job that is still waiting to run.
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  dead ZSET
-- ARGV[1]  job id
--
-- Returns  {1, envelope} cancelled; {0} unknown; {-1} in flight (refused:
--          its handler may be running); {-2} dead (refused: purge it).
local id = ARGV[1]
if redis.call('ZSCORE', KEYS[2], id) then return {-1} end
if redis.call('ZSCORE', KEYS[4], id) then return {-2} end
if redis.call('ZREM', KEYS[1], id) == 1 then
  local env = redis.call('HGET', KEYS[3], id)
  redis.call('HDEL', KEYS[3], id)
  return {1, env or false}
end
return {0}
