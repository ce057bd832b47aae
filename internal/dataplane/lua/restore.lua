-- restore.lua: put back jobs the ledger holds and Redis does not: jobs Redis
-- lost, and durable jobs the SQL ledger holds that are not in Redis yet
-- (pushed after their commit, by the relay, or by the horizon loader).
--
-- The rows of one or more names (a topic's or a partition's), fourteen
-- keys each: one call carries several names' rows only where their keys are on
-- one node (a Redis that is not a cluster), so that a batch spread over a
-- topic's partitions costs one call, as it does on one partition. A call
-- that fails part way keeps what it wrote for the names before: each row
-- is checked before it is written, so the caller's retry is safe.
--
-- KEYS[14g-13] due ZSET of name g
-- KEYS[14g-12] lease ZSET
-- KEYS[14g-11] job HASH
-- KEYS[14g-10] wake channel, published to when the earliest due time moves
--              earlier
-- KEYS[14g-9]  dead ZSET
-- KEYS[14g-8]  gone ZSET (tombstones: id -> when a durable job was acked or
--              a job cancelled, Unix ms)
-- KEYS[14g-7]  prio HASH (id -> priority 1-3 of a job of raised priority)
-- KEYS[14g-6..14g-4] pri ZSETs of priority 1-3 (id -> due time)
-- KEYS[14g-3..14g] okey HASH, ohold HASH, oq ZSET, oseq STRING: per-key
--              ordering (ordering.lua)
-- ARGV[1]  "write", or "check" (dry run: decide each row, write nothing)
-- ARGV[2]  seen at (Unix ms, Redis's clock): when the caller began reading
--          the rows from SQL. A job removed at or after it was read before
--          its removal, so it is not re-created. 0: any tombstone counts.
-- ARGV[3]  tombstone TTL (ms): how long tombstones are kept. A seen-at older
--          than that cannot be checked against them, so nothing is
--          decided for it.
-- ARGV[4..] per name, in KEYS' order: its number of rows n, then ten per
--          row: id, mode ("p" = in progress: due at once, "r" = retrying:
--          due at its run time, "s" = scheduled, a durable job's first run:
--          due at its run time, and an envelope of a dead job with this id
--          that died before seen-at or before the row's enqueued at is
--          replaced, since SQL says a new job exists; one that died at or
--          after seen-at and after the row was written is the row's own
--          job, read before its death, and answers 2), run at (Unix ms),
--          attempt, max attempts, enqueued at (Unix ms, 0 = the run time),
--          last error, payload, priority (0-3), ordering key ("" for
--          none: a job of a key holds it or is parked behind its holder;
--          "p" and "r" rows held it already, and take it back from a
--          holder that has not started)
--
-- Returns  {now, o1, o2, ...}: per row, in ARGV's order, 0 = Redis still
--          tracks the job (in due, in lease, or, except for "s", its
--          envelope is in the job hash, which covers dead jobs): nothing
--          written; 1 = no trace of it: envelope and due entry re-created
--          (with "check": would be); 2 = removed since seen-at (a
--          tombstone, or for "s" a death), or seen-at too old to tell:
--          nothing written.
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

local out = {now}

-- restore writes the n rows from ARGV[from] on of the name whose keys
-- start at KEYS[k + 1].
local function restore(k, from, n)
  local due, lease, job, wake, deadSet, goneSet = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6]
  local prio = KEYS[k + 7]
  local O = {due = due, lease = lease, job = job, wake = wake, prio = prio,
    pri = {KEYS[k + 8], KEYS[k + 9], KEYS[k + 10]},
    okey = KEYS[k + 11], ohold = KEYS[k + 12], oq = KEYS[k + 13], oseq = KEYS[k + 14]}
  local prios = nil -- whether prio exists, read once a row is written
  local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
  local headScore = nil
  if head[2] then headScore = tonumber(head[2]) end
  local earliest = nil
  for i = from, from + 10 * (n - 1), 10 do
    local id = ARGV[i]
    local mode = ARGV[i + 1]
    local tracked = redis.call('ZSCORE', due, id) or redis.call('ZSCORE', lease, id)
    local dead = false
    if not tracked and redis.call('HEXISTS', job, id) == 1 then
      dead = mode == 's' and redis.call('ZSCORE', deadSet, id)
      if not dead then
        tracked = true
      end
    end
    if tracked then
      out[#out + 1] = 0
    else
      local gone = redis.call('ZSCORE', goneSet, id)
      -- A death at or after seen-at, and after the row was written, is a
      -- removal too: the row is the dead job's own, read before its worker
      -- settled the ledger (which goes first). A row written after the
      -- death is a new job (a requeue): replaced, whatever the seen-at.
      if dead and tonumber(dead) >= seenAt and tonumber(dead) > tonumber(ARGV[i + 5]) then gone = dead end
      if tooOld or (gone and tonumber(gone) >= seenAt) then
        out[#out + 1] = 2
      else
        out[#out + 1] = 1
        if write then
          if dead then redis.call('ZREM', deadSet, id) end
          local run = tonumber(ARGV[i + 2])
          local at = run
          if mode == 'p' and at > now then at = now end
          local enq = tonumber(ARGV[i + 5])
          if enq == 0 then enq = run end
          local err = ARGV[i + 6]
          -- envelope: version|attempt|max|enqueued|run|errlen|err|payload
          redis.call('HSET', job, id, '1|' .. ARGV[i + 3] .. '|' .. ARGV[i + 4] .. '|' .. enq .. '|' .. at ..
            '|' .. #err .. '|' .. err .. '|' .. ARGV[i + 7])
          redis.call('ZADD', due, at, id)
          local l = tonumber(ARGV[i + 8]) or 0
          if l > 0 then
            redis.call('HSET', prio, id, l)
            redis.call('ZADD', KEYS[k + 7 + l], at, id)
          else
            -- A dead envelope replaced may have had a priority of its own.
            if prios == nil then prios = redis.call('EXISTS', prio) == 1 end
            if prios then redis.call('HDEL', prio, id) end
          end
          if ARGV[i + 9] ~= '' then
            ordEnter(O, id, ARGV[i + 9], at, mode ~= 's')
          elseif dead then
            -- A dead envelope replaced may have had a key of its own.
            redis.call('HDEL', O.okey, id)
          end
          if earliest == nil or at < earliest then earliest = at end
        end
      end
    end
  end
  if earliest ~= nil and (headScore == nil or earliest < headScore) then
    redis.call('PUBLISH', wake, earliest)
  end
end

local at = 4
for k = 0, #KEYS - 14, 14 do
  local n = tonumber(ARGV[at])
  if n > 0 then restore(k, at + 1, n) end
  at = at + 1 + 10 * n
end
return out
