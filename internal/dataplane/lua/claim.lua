-- claim.lua: lease up to N due jobs to the caller.
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET (id -> lease deadline, Unix ms)
-- KEYS[3]  job HASH
-- KEYS[4]  dead ZSET (id -> time of death, Unix ms)
-- KEYS[5]  paused STRING (exists: the topic is paused)
-- KEYS[6]  rate HASH {tokens, at}: the topic's token bucket, at in Redis ms
-- KEYS[7]  runs HASH (id -> runs that ended in a failure, written by retry.lua)
-- KEYS[8]  cancel HASH (cancelrun.lua's marks: a cancel asked during an
--          earlier claim whose worker died before the job ended)
-- KEYS[9]  prio HASH (id -> priority 1-3 of a job of raised priority)
-- KEYS[10..12] pri ZSETs of priority 1, 2 and 3 (id -> due time): the
--          waiting jobs of raised priority, each in due too
-- KEYS[13] turn STRING: jobs claimed since the last one taken by due time
--          alone, modulo ARGV[8]
-- KEYS[14..17] okey HASH, ohold HASH, oq ZSET, oseq STRING: per-key
--          ordering (ordering.lua); a job of a key buried here frees it
-- ARGV[1]  N, the most jobs to hand out
-- ARGV[2]  lease length, ms
-- ARGV[3]  the most expired leases to put back in this call
-- ARGV[4]  rate limit, handler starts per second across all workers (0 = none)
-- ARGV[5]  burst: the bucket's size, tokens (at least 1 when ARGV[4] > 0)
-- ARGV[6]  ahead, ms: also hand out jobs due up to this long after now (0 =
--          due ones only); the caller starts each at its due time
-- ARGV[7]  the most jobs already due to hand out (at most N): a caller
--          whose handlers are busy takes few due jobs, which other workers
--          could run now, but may still hold the coming ones
-- ARGV[8]  oldest every (1-1000): while jobs of raised priority wait, one
--          due job in this many handed out is the one due longest,
--          whatever its priority (1: due order alone)
--
-- Returns  {now, next_due, next_lease, {id, envelope, ...}, {id, envelope, ...},
--           paused, next_token, now_us, {id, runs, ...}, {id, ...},
--           {id, priority, ...}, {id, ordering key, ...}}
--          next_due: earliest due time still waiting (-1 if none);
--          next_lease: earliest lease deadline (-1 if none);
--          then the claimed jobs (attempt already bumped; due up to
--          now + ahead) and the jobs buried instead of handed out;
--          paused: 1 when the topic is paused: nothing was claimed (and
--          no token spent), else 0;
--          next_token: -1, or the time (Redis ms) the next token is there
--          when due jobs were held back for lack of tokens;
--          now_us: now in µs (a worker's clock offset, to start a job
--          claimed ahead at its due time and never before);
--          the last list gives, for claimed jobs claimed before, the runs
--          of theirs that ended (none listed: 0), so the handler learns
--          which delivery this is (Job.Delivery); the one after it the
--          claimed jobs whose cancel was asked during an earlier claim
--          (its worker died or handed it back): the worker settles them
--          cancelled without running them, even one past max attempts;
--          the one after it the claimed jobs of raised priority, with
--          theirs; the last the claimed jobs of an ordering key, with
--          theirs.
--
-- Priorities (docs/design.md §4.23): due jobs of the highest priority go
-- first, each level in due order, then the rest of due in due order; but
-- the due job at every ARGV[8]-th turn of the topic (counted in KEYS[13]
-- across claims and workers) is the head of due, the job due longest,
-- whatever its priority, so that none waits forever. A topic with no
-- waiting job of raised priority (no pri ZSET) claims by due order alone
-- and pays one EXISTS for the feature. Jobs due later (ARGV[6]) are taken
-- only once no due job is left, in due order.
--
-- Expired leases go back first, at their lease deadline, so a dead worker's
-- jobs run again before newer ones. A job already claimed max-attempts times
-- that comes round again (its worker died each time) is buried, not handed
-- out: a poison job that kills its worker must not loop forever.
--
-- Rate limit (docs/design.md §4.16): the bucket refills at ARGV[4] tokens a
-- second on Redis's clock, up to ARGV[5]; a claim takes at most
-- floor(tokens) jobs and spends one token per job handed out (buried ones
-- are free). Held-back jobs stay in due, in order. A bucket gone (never
-- used, or expired after idling) is full.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
local leaseUntil = now + tonumber(ARGV[2])
local ahead = tonumber(ARGV[6]) or 0
local nDue = tonumber(ARGV[7]) or n

-- A paused topic hands out nothing. The check is here, in the same atomic
-- step as the claim, so a pause holds for every worker from the instant
-- its key is written. Expired leases still go back to due below: a paused
-- topic's jobs wait in one place. Its bucket is not even read.
local paused = redis.call('EXISTS', KEYS[5])

local rate, burst = tonumber(ARGV[4]) or 0, tonumber(ARGV[5]) or 0
local tokens, limited = 0, false
if rate > 0 and paused == 0 then
  burst = math.max(burst, 1)
  tokens = burst
  local b = redis.call('HMGET', KEYS[6], 'tokens', 'at')
  if b[1] and b[2] then
    -- Refill since the last claim; a clock that went back (a failover to a
    -- replica whose clock lags) refills nothing rather than going negative.
    tokens = math.min(burst, tonumber(b[1]) + math.max(0, now - tonumber(b[2])) * rate / 1000)
  end
  local allowed = math.floor(tokens)
  if allowed < n then
    n, limited = allowed, true
  end
end

-- raised: some job of raised priority is waiting (a pri ZSET exists).
local raised = redis.call('EXISTS', KEYS[10], KEYS[11], KEYS[12]) > 0

local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
local prios = #expired > 0 and redis.call('EXISTS', KEYS[9]) == 1
for i = 1, #expired, 2 do
  redis.call('ZREM', KEYS[2], expired[i])
  redis.call('ZADD', KEYS[1], expired[i + 1], expired[i])
  local l = prios and redis.call('HGET', KEYS[9], expired[i])
  if l then
    redis.call('ZADD', KEYS[9 + tonumber(l)], expired[i + 1], expired[i])
    raised = true
  end
end

local claimed, buried, runs, asked, levels = {}, {}, {}, {}, {}
-- hiKey: id -> the pri ZSET (KEYS index) a job of raised priority was
-- taken from, in this claim.
local hiKey = {}
local ids = {}
if n > 0 and paused == 0 then
  local nd = math.min(nDue, n)
  if not raised then
    local cand = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now + ahead, 'WITHSCORES', 'LIMIT', 0, n)
    -- In due order: once the due ones reach nDue, the rest (due or not) wait.
    for i = 1, #cand, 2 do
      if tonumber(cand[i + 1]) <= now and #ids >= nd then break end
      ids[#ids + 1] = cand[i]
    end
  else
    -- The due jobs of raised priority, highest first, then due in due
    -- order (it holds them too: the taken are skipped). An entry whose
    -- job is not in due at the same time is stale (left by a path that
    -- missed it, say an older release's script during an upgrade): it
    -- goes, and its job is not handed out from it.
    local hi = {}
    for k = 12, 10, -1 do
      if #hi < nd then
        local c = redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', now, 'WITHSCORES', 'LIMIT', 0, nd - #hi)
        for i = 1, #c, 2 do
          local id = c[i]
          local sc = redis.call('ZSCORE', KEYS[1], id)
          if sc and tonumber(sc) == tonumber(c[i + 1]) then
            hi[#hi + 1] = id
            hiKey[id] = k
          elseif sc then
            redis.call('ZADD', KEYS[k], sc, id)
          else
            redis.call('ZREM', KEYS[k], id)
          end
        end
      end
    end
    local every = math.max(1, tonumber(ARGV[8]) or 10)
    local turn = (tonumber(redis.call('GET', KEYS[13])) or 0) % every
    local byTime = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, nd + #hi)
    local taken, h, b = {}, 1, 1
    for s = 1, nd do
      local id = nil
      if (turn + s) % every ~= 0 then
        while hi[h] and taken[hi[h]] do h = h + 1 end
        id = hi[h]
        if id then h = h + 1 end
      end
      if not id then
        while byTime[b] and taken[byTime[b]] do b = b + 1 end
        id = byTime[b]
        if id then b = b + 1 end
      end
      if not id then break end
      taken[id] = true
      ids[#ids + 1] = id
    end
    if #ids > 0 then redis.call('SET', KEYS[13], (turn + #ids) % every) end
    if ahead > 0 and #ids < n then
      -- The coming ones, in due order, once no due job is left (as in
      -- due order alone): among the #ids + 1 due longest, one not taken
      -- says one is left.
      local left = false
      for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, #ids + 1)) do
        if not taken[id] then
          left = true
          break
        end
      end
      if not left then
        local later = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, now + ahead, 'LIMIT', 0, n - #ids)
        for _, id in ipairs(later) do ids[#ids + 1] = id end
      end
    end
  end
end
-- Marks are read only while the cancel hash exists, which is seldom.
local marks = #ids > 0 and redis.call('EXISTS', KEYS[8]) == 1
-- Ordering keys are read only while some job has one.
local ordered = #ids > 0 and redis.call('EXISTS', KEYS[14]) == 1
local O = {due = KEYS[1], lease = KEYS[2], job = KEYS[3], prio = KEYS[9], pri = {KEYS[10], KEYS[11], KEYS[12]},
  okey = KEYS[14], ohold = KEYS[15], oq = KEYS[16], oseq = KEYS[17]}
local okeys = {}
for _, id in ipairs(ids) do
  local inDue = redis.call('ZREM', KEYS[1], id) == 1
  local level = raised and redis.call('HGET', KEYS[9], id)
  if level then
    redis.call('ZREM', KEYS[9 + tonumber(level)], id)
  end
  if hiKey[id] and hiKey[id] ~= 9 + tonumber(level or 0) then
    -- Taken from a pri ZSET its prio field does not name.
    redis.call('ZREM', hiKey[id], id)
  end
  local env = inDue and redis.call('HGET', KEYS[3], id)
  if env then
    local attempt, tail, max, rest = string.match(env, '^1|(%d+)|()(%d+)|()')
    attempt, max = tonumber(attempt), tonumber(max)
    -- A cancel asked of an earlier claim (its worker died or handed it
    -- back): the mark is this job's when it names its enqueued time.
    local ask = false
    if marks then
      local mark = redis.call('HGET', KEYS[8], id)
      ask = mark and string.match(mark, '^(%d+)|') == string.match(env, '^1|%d+|%d+|(%d+)|') or false
    end
    if ask then
      -- Handed out whatever its attempts: the worker settles it cancelled
      -- without running it, rather than burying a job asked to cancel.
      asked[#asked + 1] = id
    end
    if attempt >= max and not ask then
      local enq, run, elen, p = string.match(env, '^(%d+)|(%d+)|(%d+)|()', rest)
      local err = 'lease expired ' .. attempt .. ' times: worker died or hung (max attempts ' .. max .. ')'
      env = '1|' .. attempt .. '|' .. max .. '|' .. enq .. '|' .. run .. '|' .. #err .. '|' .. err .. '|' ..
        string.sub(env, p + tonumber(elen) + 1)
      redis.call('HSET', KEYS[3], id, env)
      redis.call('ZADD', KEYS[4], now, id)
      redis.call('HDEL', KEYS[7], id)
      if ordered then ordLeave(O, id, true) end
      buried[#buried + 1] = id
      buried[#buried + 1] = env
    else
      env = '1|' .. (attempt + 1) .. '|' .. string.sub(env, tail)
      redis.call('HSET', KEYS[3], id, env)
      redis.call('ZADD', KEYS[2], leaseUntil, id)
      claimed[#claimed + 1] = id
      claimed[#claimed + 1] = env
      if level then
        levels[#levels + 1] = id
        levels[#levels + 1] = tonumber(level)
      end
      local key = ordered and ordInfo(O, id)
      if key then
        okeys[#okeys + 1] = id
        okeys[#okeys + 1] = key
      end
      if attempt > 0 then
        -- Claimed before: some of those claims may have run to an answer.
        local r = redis.call('HGET', KEYS[7], id)
        if r then
          runs[#runs + 1] = id
          runs[#runs + 1] = tonumber(r)
        end
      end
    end
  end
  -- a due entry without an envelope is debris of a partial delete: dropped,
  -- with its priority, and its key handed on if it held one
  if inDue and not env then
    redis.call('HDEL', KEYS[9], id)
    if ordered then ordLeave(O, id, false) end
  end
end

local nextDue, nextLease = -1, -1
-- Jobs parked behind their key's holder are not coming: their holder's
-- end promotes them, and wakes the workers.
local h = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. PARK, 'WITHSCORES', 'LIMIT', 0, 1)
if h[2] then nextDue = tonumber(h[2]) end
h = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if h[2] then nextLease = tonumber(h[2]) end

local nextToken = -1
if rate > 0 then
  if #claimed > 0 then
    -- Written only when spent: the refill is linear up to the cap, so an
    -- unchanged bucket computes the same later from its old {tokens, at}.
    tokens = tokens - #claimed / 2 -- claimed is a flat {id, envelope, ...} list: one token per job
    redis.call('HSET', KEYS[6], 'tokens', tostring(tokens), 'at', now)
    -- Idle for a full refill the bucket is full, the same as gone: it
    -- expires after twice that, so idle topics keep no bucket.
    redis.call('PEXPIRE', KEYS[6], math.max(1000, math.ceil(2000 * burst / rate)))
  end
  if limited and paused == 0 and nextDue >= 0 and nextDue <= now then
    nextToken = now + math.max(0, math.ceil((1 - tokens) * 1000 / rate))
  end
end
return {now, nextDue, nextLease, claimed, buried, paused, nextToken, tonumber(t[1]) * 1000000 + tonumber(t[2]), runs, asked, levels, okeys}
