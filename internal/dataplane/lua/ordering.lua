-- ordering.lua: per-key ordering (docs/design.md §4.24), the functions of
-- the scripts that place, end or move a job of an ordering key. scripts.go
-- puts this file before each of them; it defines functions and runs
-- nothing.
--
-- A topic's keys for it, passed in a table O = {due=, lease=, job=, prio=,
-- pri={p1, p2, p3}, okey=, ohold=, oq=, oseq=, wake=} (wake may be nil):
--   okey  HASH id -> "key|seq": every waiting, in flight or dead job of an
--         ordering key (a dead job's stays for its requeue)
--   ohold HASH key -> the id holding the key: its head, waiting, in flight
--         or retrying; the only job of the key a claim can see
--   oq    ZSET, scores 0, members "key|due|seq|id" (due and seq 15
--         digits): the key's other waiting jobs, parked, in due order and
--         enqueue order among equal due times (ZRANGEBYLEX)
--   oseq  STRING: the counter seq comes from
-- A parked job stays in due at PARK + its due time, beyond any claim's
-- reach (claims look up to now + ahead), so get, list, cancel and
-- reschedule find it where they look for a waiting job. Ordering keys use
-- an id's characters, all below '|', so "key|" starts exactly the key's
-- members and "key}" bounds them.
local PARK = 2251799813685248 -- 2^51 ms: beyond any due time, within a double's exact integers

-- ordInfo returns the key and seq of id, or nil when it has no key.
local function ordInfo(O, id)
  local v = redis.call('HGET', O.okey, id)
  if not v then return nil end
  return string.match(v, '^(.*)|(%d+)$')
end

local function ordMember(key, due, seq, id)
  return key .. '|' .. string.format('%015d', due) .. '|' .. seq .. '|' .. id
end

-- ordPark moves id (of key and seq), waiting and due at d, out of the
-- claims' reach: due at PARK + d (and so in its level's pri ZSET, which
-- mirrors due), in oq.
local function ordPark(O, id, key, seq, d)
  redis.call('ZADD', O.due, PARK + d, id)
  redis.call('ZADD', O.oq, 0, ordMember(key, d, seq, id))
  local l = redis.call('HGET', O.prio, id)
  if l then redis.call('ZADD', O.pri[tonumber(l)], PARK + d, id) end
end

-- ordUnpark removes the oq entry of id (of key and seq), parked with due
-- score score.
local function ordUnpark(O, id, key, seq, score)
  redis.call('ZREM', O.oq, ordMember(key, score - PARK, seq, id))
end

-- ordFirst returns the key's earliest parked job: id, due time, oq
-- member; or nil. An entry whose job is not parked at that time, or has no
-- envelope (debris of a path that missed it), goes.
local function ordFirst(O, key)
  while true do
    local m = redis.call('ZRANGEBYLEX', O.oq, '[' .. key .. '|', '(' .. key .. '}', 'LIMIT', 0, 1)[1]
    if not m then return nil end
    local d, id = string.match(m, '|(%d+)|%d+|([^|]*)$')
    d = tonumber(d)
    if tonumber(redis.call('ZSCORE', O.due, id)) == PARK + d and redis.call('HEXISTS', O.job, id) == 1 then
      return id, d, m
    end
    redis.call('ZREM', O.oq, m)
  end
end

-- ordTake makes id, parked as oq member m, the key's holder: back in due
-- (and its level's pri ZSET) at its envelope's run at (the member's due
-- time d, but for a job that held the key before, parked first in line
-- with d 0: ordEnter).
local function ordTake(O, key, id, d, m)
  redis.call('ZREM', O.oq, m)
  local env = redis.call('HGET', O.job, id)
  d = env and tonumber(string.match(env, '^1|%d+|%d+|%d+|(%d+)|')) or d
  redis.call('ZADD', O.due, d, id)
  local l = redis.call('HGET', O.prio, id)
  if l then redis.call('ZADD', O.pri[tonumber(l)], d, id) end
  redis.call('HSET', O.ohold, key, id)
  if O.wake and redis.call('ZRANK', O.due, id) == 0 then redis.call('PUBLISH', O.wake, d) end
end

-- ordPromote gives key to its earliest parked job, or frees it.
local function ordPromote(O, key)
  local id, d, m = ordFirst(O, key)
  if id then
    ordTake(O, key, id, d, m)
  else
    redis.call('HDEL', O.ohold, key)
  end
end

-- ordWaiting reads a waiting holder: whether it has not started (never
-- claimed to a run: no retry, no lease that ran out), so that it can give
-- way, and its due time (its envelope's run at, which a release handed
-- back to wait for its key leaves as it was: its score is later).
local function ordWaiting(O, id)
  local env = redis.call('HGET', O.job, id)
  if not env then return false, nil end
  local attempt, run = string.match(env, '^1|(%d+)|%d+|%d+|(%d+)|')
  return attempt == '0', tonumber(run)
end

-- ordBalance settles key after a change: a holder that is gone (debris)
-- gives the key to the earliest parked job, and one that has not started
-- gives it to a parked job due earlier than itself.
local function ordBalance(O, key)
  local h = redis.call('HGET', O.ohold, key)
  local hs = h and tonumber(redis.call('ZSCORE', O.due, h))
  if h and not hs and redis.call('ZSCORE', O.lease, h) then return end -- in flight: holds
  if not hs or hs >= PARK then return ordPromote(O, key) end
  local fresh, hd = ordWaiting(O, h)
  if not fresh then return end
  local id, d, m = ordFirst(O, key)
  if id and d < hd then
    local _, seq = ordInfo(O, h)
    ordPark(O, h, key, seq, hd)
    ordTake(O, key, id, d, m)
  end
end

-- ordEnter places id, of key, just written to due at d (and to its
-- level's pri ZSET): it holds the key if free, else it is parked and the
-- key balanced (an earlier job takes it from a holder that has not
-- started). force: id held the key already when Redis lost it (the
-- ledger's row of a job in flight or retrying, restored): it takes the key
-- back from a holder that has not started; from one in flight (a claim
-- the ledger will refuse for it, whose hand-back balances the key) it is
-- parked first in line (due 0 in oq; ordTake puts it back at its own
-- time).
local function ordEnter(O, id, key, d, force)
  local seq = string.format('%015d', redis.call('INCR', O.oseq))
  redis.call('HSET', O.okey, id, key .. '|' .. seq)
  local h = redis.call('HGET', O.ohold, key)
  if not h or h == id then
    redis.call('HSET', O.ohold, key, id)
    return
  end
  if force then
    local hs = tonumber(redis.call('ZSCORE', O.due, h))
    local fresh, hd = ordWaiting(O, h)
    if hs and hs < PARK and fresh then
      local _, hseq = ordInfo(O, h)
      ordPark(O, h, key, hseq, hd)
      redis.call('HSET', O.ohold, key, id)
      return
    end
  end
  if force then d = 0 end
  ordPark(O, id, key, seq, d)
  ordBalance(O, key)
end

-- ordLeave: id ended for good (succeeded, cancelled or dead); if it held
-- its key, the key's next job takes it. keep: its okey field stays (a dead
-- job's, for a requeue). score: its due score before it left due, if it
-- was there: a job settled while parked (its old claim's settlement, after
-- a restore parked it) leaves its oq entry too.
local function ordLeave(O, id, keep, score)
  local key, seq = ordInfo(O, id)
  if not key then return end
  if score and score >= PARK then ordUnpark(O, id, key, seq, score) end
  if not keep then redis.call('HDEL', O.okey, id) end
  if redis.call('HGET', O.ohold, key) == id then ordPromote(O, key) end
end
