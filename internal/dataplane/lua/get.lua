-- get.lua: one job's state and envelope.
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  dead ZSET
-- KEYS[5]  cancel HASH (cancelrun.lua's marks)
-- ARGV[1]  job id
--
-- Returns  {set, score, envelope}: set "due" (score = due time), "lease"
--          (score = lease deadline), "dead" (score = time of death), or
--          {"unknown"} alone. state.go (stateInRedis) maps the set onto a State.
--          A held job whose cancel was asked has a fourth value: when it
--          was first asked (Redis ms).
local id = ARGV[1]
local env = redis.call('HGET', KEYS[3], id)
if not env then return {'unknown'} end
local s = redis.call('ZSCORE', KEYS[2], id)
if s then
  local mark = redis.call('HGET', KEYS[5], id)
  -- The mark is this job's when it names its envelope's enqueued time.
  if mark and string.match(mark, '^(%d+)|') == string.match(env, '^%d+|%d+|%d+|(%d+)|') then
    return {'lease', s, env, tonumber(string.match(mark, '|(%d+)$'))}
  end
  return {'lease', s, env}
end
s = redis.call('ZSCORE', KEYS[1], id)
if s then return {'due', s, env} end
s = redis.call('ZSCORE', KEYS[4], id)
if s then return {'dead', s, env} end
return {'unknown'}
