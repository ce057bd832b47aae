-- cancelrun.lua: ask the worker that holds a job to cancel its run.
--
-- KEYS[1]  lease ZSET
-- KEYS[2]  job HASH
-- KEYS[3]  cancel HASH (id -> the envelope's enqueued time, then "|" and
--          when the cancel was asked, Redis ms)
-- KEYS[4]  wake channel of the job's partition, which every worker of the
--          topic listens to
-- ARGV[1]  job id
--
-- Returns  {1, envelope, asked at, lease deadline}: asked (now, or
--          earlier: the first ask stands); {0}: no worker holds the job
--          (waiting, dead or unknown; Cancel handles those).
--
-- The mark names the envelope's enqueued time, so a later job with the
-- same id (enqueued after this one ended) is never taken for this one.
-- Marks whose job has left the job hash (settled without seeing theirs)
-- are trimmed here: asks are rare, so the hash stays small.
local id = ARGV[1]
local lease = redis.call('ZSCORE', KEYS[1], id)
if not lease then return {0} end
local env = redis.call('HGET', KEYS[2], id)
if not env then return {0} end
-- envelope: version|attempt|max|enqueued|...
local enq = string.match(env, '^%d+|%d+|%d+|(%d+)|')
local old = redis.call('HGET', KEYS[3], id)
if old and string.match(old, '^(%d+)|') == enq then
  -- Asked again: the first time stands; the message goes again, for a
  -- worker that missed it.
  redis.call('PUBLISH', KEYS[4], 'cancel ' .. id)
  return {1, env, tonumber(string.match(old, '|(%d+)$')), lease}
end
local marks = redis.call('HKEYS', KEYS[3])
for _, m in ipairs(marks) do
  if m ~= id and redis.call('HEXISTS', KEYS[2], m) == 0 then
    redis.call('HDEL', KEYS[3], m)
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[3], id, enq .. '|' .. now)
redis.call('PUBLISH', KEYS[4], 'cancel ' .. id)
return {1, env, now, lease}
