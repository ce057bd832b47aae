-- cancel.lua: remove a job that is still waiting to run.
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  dead ZSET
-- ARGV[1]  job id
-- ARGV[2]  the attempt the caller saw the job waiting at (its ledger row of
--          that attempt is gone already)
--
-- Returns  {1, envelope} cancelled; {0} unknown; {-1} in flight (refused:
--          its handler may be running); {-2} dead (refused: purge it); {-3}
--          waiting at another attempt (claimed and retried since the caller
--          looked, with a ledger row of its own): nothing done.
local id = ARGV[1]
if redis.call('ZSCORE', KEYS[2], id) then return {-1} end
if redis.call('ZSCORE', KEYS[4], id) then return {-2} end
if not redis.call('ZSCORE', KEYS[1], id) then return {0} end
local env = redis.call('HGET', KEYS[3], id)
-- envelope: version|attempt|...
if env and string.match(env, '^%d+|(%d+)|') ~= ARGV[2] then return {-3} end
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[3], id)
return {1, env or false}
