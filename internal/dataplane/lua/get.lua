-- get.lua: one job's state and envelope.
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  dead ZSET
-- KEYS[5]  cancel HASH (cancelrun.lua's marks)
-- KEYS[6]  prio HASH (id -> priority 1-3 of a job of raised priority)
-- KEYS[7]  okey HASH (id -> "ordering key|seq", ordering.lua)
-- ARGV[1]  job id
--
-- Returns  {set, score, envelope, asked, priority, ordering key}: set "due" (score = due
--          time), "lease" (score = lease deadline), "dead" (score = time
--          of death), or {"unknown"} alone. state.go (stateInRedis) maps
--          the set onto a State. asked: for a held job whose cancel was
--          asked, when it was first asked (Redis ms), else 0; priority:
--          the job's, 0 by default; ordering key: "" for none. A job
--          parked behind its key's holder is in due at 2^51 + its due time.
local id = ARGV[1]
local env = redis.call('HGET', KEYS[3], id)
if not env then return {'unknown'} end
local prio = tonumber(redis.call('HGET', KEYS[6], id)) or 0
local key = string.match(redis.call('HGET', KEYS[7], id) or '', '^(.*)|%d+$') or ''
local s = redis.call('ZSCORE', KEYS[2], id)
if s then
  local mark = redis.call('HGET', KEYS[5], id)
  -- The mark is this job's when it names its envelope's enqueued time.
  if mark and string.match(mark, '^(%d+)|') == string.match(env, '^%d+|%d+|%d+|(%d+)|') then
    return {'lease', s, env, tonumber(string.match(mark, '|(%d+)$')), prio, key}
  end
  return {'lease', s, env, 0, prio, key}
end
s = redis.call('ZSCORE', KEYS[1], id)
if s then return {'due', s, env, 0, prio, key} end
s = redis.call('ZSCORE', KEYS[4], id)
if s then return {'dead', s, env, 0, prio, key} end
return {'unknown'}
