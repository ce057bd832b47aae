-- cancel.lua: remove a job that is still waiting to run.
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  dead ZSET
-- KEYS[5]  gone ZSET (tombstones, docs/design.md §4.11)
-- KEYS[6]  runs HASH (id -> runs that ended in a failure): the job's field goes
-- KEYS[7]  taken ZSET (the uniqueness window, docs/design.md §4.2.1)
-- KEYS[8]  prio HASH (id -> priority 1-3), KEYS[9..11] pri ZSETs of
--          priority 1-3: the job's priority goes with it
-- KEYS[12..15] okey HASH, ohold HASH, oq ZSET, oseq STRING (per-key
--          ordering, ordering.lua), KEYS[16] wake channel: a parked job
--          leaves its key's queue; a holder hands the key on
-- ARGV[1]  job id
-- ARGV[2]  the attempt the caller saw the job waiting at (its ledger row of
--          that attempt is gone already)
-- ARGV[3]  tombstone TTL (ms): the cancelled job gets a tombstone (id ->
--          now), so a relay or recovery pass that read its row before the
--          row went cannot restore it; older tombstones are trimmed
-- ARGV[4]  the topic's uniqueness window in ms, 0 for none: a cancelled
--          job's id is taken until now + it (score × 4 + 1, cancelled)
--
-- Returns  {1, envelope, priority, ordering key} cancelled; {0} unknown (a tombstone is left all
--          the same); {-1} in flight (refused:
--          its handler may be running); {-2} dead (refused: purge it); {-3}
--          waiting at another attempt (claimed and retried since the caller
--          looked, with a ledger row of its own): nothing done.
local id = ARGV[1]
if redis.call('ZSCORE', KEYS[2], id) then return {-1} end
if redis.call('ZSCORE', KEYS[4], id) then return {-2} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function tombstone()
  redis.call('ZADD', KEYS[5], now, id)
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. (now - tonumber(ARGV[3])))
end
local score = tonumber(redis.call('ZSCORE', KEYS[1], id))
if not score then
  -- Unknown here: the caller deleted a row Redis had no trace of; the
  -- tombstone keeps a pass that read that row from restoring the job.
  tombstone()
  return {0}
end
local env = redis.call('HGET', KEYS[3], id)
-- envelope: version|attempt|...
if env and string.match(env, '^%d+|(%d+)|') ~= ARGV[2] then return {-3} end
local O = {due = KEYS[1], lease = KEYS[2], job = KEYS[3], prio = KEYS[8], pri = {KEYS[9], KEYS[10], KEYS[11]},
  okey = KEYS[12], ohold = KEYS[13], oq = KEYS[14], oseq = KEYS[15], wake = KEYS[16]}
local key, seq = ordInfo(O, id)
if key and score >= PARK then ordUnpark(O, id, key, seq, score) end
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[3], id)
if key then ordLeave(O, id, false) end
local l = redis.call('HGET', KEYS[8], id)
if l then
  redis.call('ZREM', KEYS[8 + tonumber(l)], id)
  redis.call('HDEL', KEYS[8], id)
end
local prio = tonumber(l) or 0
if ARGV[2] ~= '0' then redis.call('HDEL', KEYS[6], id) end
tombstone()
local window = tonumber(ARGV[4])
if window > 0 then
  redis.call('ZADD', KEYS[7], (now + window) * 4 + 1, id)
  redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', (now + 1) * 4 - 1)
end
return {1, env or false, prio, key or ''}
