-- restore.lua: put back jobs the ledger holds and Redis does not: jobs Redis
-- lost, and durable jobs the SQL ledger holds that are not in Redis yet
-- (pushed after their commit, by the relay, or by the horizon loader).
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  wake channel, published to when the earliest due time moves earlier
-- KEYS[5]  dead ZSET
-- KEYS[6]  gone ZSET (tombstones: id -> when a durable job was acked or a
--          job cancelled, Unix ms)
-- ARGV[1]  "write", or "check" (dry run: decide each row, write nothing)
-- ARGV[2]  seen at (Unix ms, Redis's clock): when the caller began reading
--          the rows from SQL. A job removed at or after it was read before
--          its removal, so it is not re-created. 0: any tombstone counts.
-- ARGV[3]  tombstone TTL (ms): how long tombstones are kept. A seen-at older
--          than that cannot be checked against them, so nothing is
--          decided for it.
-- ARGV[4..] eight per row: id, mode ("p" = in progress: due at once, "r" =
--          retrying: due at its run time, "s" = scheduled, a durable job's
--          first run: due at its run time, and an envelope of a dead job
--          with this id is replaced, since SQL says a new job exists), run
--          at (Unix ms), attempt, max attempts, enqueued at (Unix ms, 0 =
--          the run time), last error, payload
--
-- Returns  {now, o1, o2, ...}: per row 0 = Redis still tracks the job (in
--          due, in lease, or, except for "s", its envelope is in the job
--          hash, which covers dead jobs): nothing written; 1 = no trace of
--          it: envelope and due entry re-created (with "check": would be);
--          2 = removed since seen-at (a tombstone), or seen-at too old to
--          tell: nothing written.
--
-- The check and the write are one atomic step, so two recoverers (or a
-- recoverer and the relay) running over the same rows re-create each job
-- once. The envelope keeps the row's attempt (the next claim bumps it, as
-- after a lease expiry) and last error.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local write = ARGV[1] == 'write'
local seenAt = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local tooOld = seenAt > 0 and now - seenAt >= ttl

local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local headScore = nil
if head[2] then headScore = tonumber(head[2]) end
local earliest = nil

local out = {now}
for i = 4, #ARGV, 8 do
  local id = ARGV[i]
  local mode = ARGV[i + 1]
  local tracked = redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id)
  local dead = false
  if not tracked and redis.call('HEXISTS', KEYS[3], id) == 1 then
    if mode == 's' and redis.call('ZSCORE', KEYS[5], id) then
      dead = true
    else
      tracked = true
    end
  end
  if tracked then
    out[#out + 1] = 0
  else
    local gone = redis.call('ZSCORE', KEYS[6], id)
    if tooOld or (gone and tonumber(gone) >= seenAt) then
      out[#out + 1] = 2
    else
      out[#out + 1] = 1
      if write then
        if dead then redis.call('ZREM', KEYS[5], id) end
        local run = tonumber(ARGV[i + 2])
        local due = run
        if mode == 'p' and due > now then due = now end
        local enq = tonumber(ARGV[i + 5])
        if enq == 0 then enq = run end
        local err = ARGV[i + 6]
        -- envelope: version|attempt|max|enqueued|run|errlen|err|payload
        redis.call('HSET', KEYS[3], id, '1|' .. ARGV[i + 3] .. '|' .. ARGV[i + 4] .. '|' .. enq .. '|' .. due ..
          '|' .. #err .. '|' .. err .. '|' .. ARGV[i + 7])
        redis.call('ZADD', KEYS[1], due, id)
        if earliest == nil or due < earliest then earliest = due end
      end
    end
  end
end

if earliest ~= nil and (headScore == nil or earliest < headScore) then
  redis.call('PUBLISH', KEYS[4], earliest)
end
return out
