-- reschedule.lua: move a waiting job's due time (docs/design.md §4.14).
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  dead ZSET
-- KEYS[5]  wake channel, published to when the job becomes due earlier than
--          the head was
-- KEYS[6]  prio HASH (id -> priority 1-3), KEYS[7..9] pri ZSETs of
--          priority 1-3: a job of raised priority moves in its level's too
-- ARGV[1]  job id
-- ARGV[2]  the attempt the caller saw the job waiting at (its ledger row,
--          if any, was moved for that attempt already)
-- ARGV[3]  the due time the caller saw (Unix ms): compare and set, so two
--          reschedules racing each other cannot leave Redis and SQL apart
-- ARGV[4]  the new due time (Unix ms), written as given: the caller
--          computed it from Redis's clock and wrote it to the ledger row
--          already, and the two stores must agree (a time in the past is
--          simply due)
--
-- Returns  {1, old due, new due, envelope, priority} moved (the envelope's run at is
--          the new due time); {0} unknown; {-1} in flight (refused: its
--          handler may be running); {-2} dead (refused); {-3} waiting at
--          another attempt or due time than the caller saw (claimed and
--          retried, or rescheduled, meanwhile): nothing done.
local id = ARGV[1]
if redis.call('ZSCORE', KEYS[2], id) then return {-1} end
if redis.call('ZSCORE', KEYS[4], id) then return {-2} end
local old = redis.call('ZSCORE', KEYS[1], id)
local env = redis.call('HGET', KEYS[3], id)
if not old or not env then return {0} end
-- envelope: version|attempt|max|enqueued|run|errlen|err|payload
local attempt, max, enq, p = string.match(env, '^1|(%d+)|(%d+)|(%d+)|%d+|()')
if attempt ~= ARGV[2] or tonumber(old) ~= tonumber(ARGV[3]) then return {-3} end
local due = tonumber(ARGV[4])
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
env = '1|' .. attempt .. '|' .. max .. '|' .. enq .. '|' .. due .. '|' .. string.sub(env, p)
redis.call('HSET', KEYS[3], id, env)
redis.call('ZADD', KEYS[1], due, id)
local l = redis.call('HGET', KEYS[6], id)
if l then redis.call('ZADD', KEYS[6 + tonumber(l)], due, id) end
local prio = tonumber(l) or 0
-- Workers sleep until the head's due time; only an earlier one needs them.
if not head[2] or due < tonumber(head[2]) then
  redis.call('PUBLISH', KEYS[5], due)
end
return {1, tonumber(old), due, env, prio}
