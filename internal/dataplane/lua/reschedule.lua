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
-- KEYS[10..13] okey HASH, ohold HASH, oq ZSET, oseq STRING (per-key
--          ordering, ordering.lua): a parked job moves in its key's queue
--          and stays parked; then the key is balanced (a job due earlier
--          than a holder that has not started takes the key)
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
-- Returns  {1, old due, new due, envelope, priority, ordering key, parked
--          (1: behind an earlier job of its key, after the key's balance)} moved (the envelope's run at is
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
-- A job parked behind its key's holder (ordering.lua) is due at old - PARK.
local score = tonumber(old)
local parked = score >= PARK
old = parked and score - PARK or score
if attempt ~= ARGV[2] or old ~= tonumber(ARGV[3]) then return {-3} end
local due = tonumber(ARGV[4])
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
env = '1|' .. attempt .. '|' .. max .. '|' .. enq .. '|' .. due .. '|' .. string.sub(env, p)
redis.call('HSET', KEYS[3], id, env)
local l = redis.call('HGET', KEYS[6], id)
local prio = tonumber(l) or 0
local O = {due = KEYS[1], lease = KEYS[2], job = KEYS[3], prio = KEYS[6], pri = {KEYS[7], KEYS[8], KEYS[9]},
  okey = KEYS[10], ohold = KEYS[11], oq = KEYS[12], oseq = KEYS[13], wake = KEYS[5]}
local key, seq = ordInfo(O, id)
if parked and key then
  ordUnpark(O, id, key, seq, score)
  ordPark(O, id, key, seq, due)
else
  redis.call('ZADD', KEYS[1], due, id)
  if l then redis.call('ZADD', KEYS[6 + tonumber(l)], due, id) end
  -- Workers sleep until the head's due time; only an earlier one needs them.
  if not head[2] or due < tonumber(head[2]) then
    redis.call('PUBLISH', KEYS[5], due)
  end
end
if key then ordBalance(O, key) end
local parked = key and tonumber(redis.call('ZSCORE', KEYS[1], id)) >= PARK and 1 or 0
return {1, old, due, env, prio, key or '', parked}
