-- enqueue.lua: add jobs to a topic unless their id is already known.
--
-- KEYS[1]  due ZSET   (id -> due time, Unix ms)
-- KEYS[2]  job HASH   (id -> envelope)
-- KEYS[3]  wake channel, published to when the earliest due time moves earlier
-- KEYS[4]  taken ZSET, the uniqueness window (docs/design.md §4.2.1): id ->
--          (taken until, ms) × 4 + how its job ended; an id taken until
--          later than now is a duplicate (no key: no window)
-- ARGV     for n jobs: the n ids, then three per job: when (<= 0: a delay of
--          -when ms from Redis's clock; > 0: absolute Unix ms), max
--          attempts, payload
--
-- Returns  for one job, an integer; for more, an array of one per job:
--          t > 0 created, due at t; t < 0 duplicate, waiting and due at -t;
--          0 duplicate that is not waiting (in flight or dead);
--          t <= -2^50 duplicate of a finished job whose id is still taken:
--          -t - 2^50 is its taken ZSET score.
--
-- Several groups at once (the partitions of a topic, on a Redis that is
-- not a cluster, so that a batch spread over them costs one call; the
-- priorities of a batch): ARGV[1] is "+", KEYS are four per group as
-- above, and ARGV[2..] per group, in KEYS' order, its number of jobs n and
-- then its jobs as above. With "~" each group's keys go on with the prio
-- HASH (id -> priority) and the pri ZSETs of priority 1 to 3 (id -> due
-- time), and its n is followed by the priority of its jobs (0-3): a
-- created job of priority l > 0 is written to prio and to the pri ZSET of
-- l too (docs/design.md §4.23). With "%" each group's eight keys go on
-- with its lease ZSET and its ordering keys (okey, ohold, oq, oseq:
-- ordering.lua), and its jobs' values are followed by one ordering key per
-- job ("" for none): a created job of a key holds it or is parked behind
-- its holder (§4.24). Returns an array of one per job, in ARGV's order.
--
-- The id is the idempotency key: a job that is due, in flight or dead keeps
-- its envelope in the job hash, so its presence there decides. Due times
-- come from Redis's clock, so no client clock can make a job due early; a
-- time in the past means due now. Numbers are put into the envelope and the
-- ZSET as strings built once: Lua formats a number with sprintf, which costs
-- as much as a Redis command.
local t = redis.call('TIME')
local us = t[2]
local ms = #us > 3 and string.sub(us, 1, -4) or '0'
local now = t[1] * 1000 + ms
local nows = t[1] .. string.sub('00' .. ms, -3)
-- FINISHED offsets the reply of a duplicate of a finished job, beyond any
-- due time (2^50 ms is the year 37,648), within a double's exact integers.
local FINISHED = 1125899906842624
-- takenFloor: a taken score at or above it is a window still open.
local takenFloor = (now + 1) * 4

-- waitingDue is the due time of a known id (0 when not waiting): a job
-- parked behind its ordering key's holder is in due at PARK + its due time.
local function waitingDue(dueKey, id)
  local s = tonumber(redis.call('ZSCORE', dueKey, id)) or 0
  if s >= PARK then s = s - PARK end
  return s
end

-- due returns the due time of a job and the same as a string.
local function due(when, whens)
  if when <= 0 then
    if when == 0 then return now, nows end
    local d = now - when
    return d, tostring(d)
  end
  if when > now then return when, whens end
  return now, nows
end

-- enqueue adds the n jobs whose ids start at ARGV[o + 1] (and their three
-- values each at ARGV[o + n + 1]) to the keys dueKey, jobKey and wakeKey,
-- appending one result per job to out; an id taken in takenKey is a
-- duplicate; with prioKey, the created jobs are of priority level
-- (a string) and go in priKey too, or, of level 0 (no priKey), lose any
-- prio field an earlier job of the same id left.
local function enqueue(dueKey, jobKey, wakeKey, takenKey, o, n, out, prioKey, priKey, level)
  -- A batch: one HMGET finds the known ids, one HSET and one ZADD write
  -- the new jobs (chunked: unpack takes a few thousand values at most).
  local known = {}
  for i = 1, n, 1000 do
    local part = redis.call('HMGET', jobKey, unpack(ARGV, o + i, o + math.min(i + 999, n)))
    for k = 1, #part do known[i + k - 1] = part[k] end
  end
  local taken = {}
  for i = 1, n, 1000 do
    local part = redis.call('ZMSCORE', takenKey, unpack(ARGV, o + i, o + math.min(i + 999, n)))
    for k = 1, #part do
      local sc = part[k] and tonumber(part[k])
      if sc and sc >= takenFloor then taken[i + k - 1] = sc end
    end
  end
  local base = #out
  local hargs, zargs = {}, {}
  local pending = {} -- id -> due, for duplicates inside this batch
  local earliest, earliests
  local lastWhen, lastDue, lastDues -- a batch mostly shares one delay
  for k = 1, n do
    local id = ARGV[o + k]
    local p = pending[id]
    if p then
      out[base + k] = -p
    elseif known[k] then
      out[base + k] = -waitingDue(dueKey, id)
    elseif taken[k] then
      out[base + k] = -(FINISHED + taken[k])
    else
      local b = o + n + 3 * k - 2
      local when = tonumber(ARGV[b])
      local d, ds
      if when == lastWhen then
        d, ds = lastDue, lastDues
      else
        d, ds = due(when, ARGV[b])
        lastWhen, lastDue, lastDues = when, d, ds
      end
      local m = #hargs
      hargs[m + 1] = id
      hargs[m + 2] = '1|0|' .. ARGV[b + 1] .. '|' .. nows .. '|' .. ds .. '|0||' .. ARGV[b + 2]
      zargs[m + 1] = ds
      zargs[m + 2] = id
      pending[id] = d
      if earliest == nil or d < earliest then earliest, earliests = d, ds end
      out[base + k] = d
    end
  end
  if earliest ~= nil then
    -- Nothing due at or before the earliest new job: it is the new head.
    local wake = redis.call('ZCOUNT', dueKey, '-inf', earliests) == 0
    for i = 1, #hargs, 1000 do
      local j = math.min(i + 999, #hargs)
      redis.call('HSET', jobKey, unpack(hargs, i, j))
      redis.call('ZADD', dueKey, unpack(zargs, i, j))
      if priKey then
        local pargs = {}
        for m = i, j, 2 do
          pargs[#pargs + 1] = hargs[m]
          pargs[#pargs + 1] = level
        end
        redis.call('HSET', prioKey, unpack(pargs))
        redis.call('ZADD', priKey, unpack(zargs, i, j))
      elseif prioKey and redis.call('EXISTS', prioKey) == 1 then
        local dargs = {}
        for m = i, j, 2 do dargs[#dargs + 1] = hargs[m] end
        redis.call('HDEL', prioKey, unpack(dargs))
      end
    end
    if wake then redis.call('PUBLISH', wakeKey, earliests) end
  end
end

-- one adds the job whose id is ARGV[o + 1] (its three values after it)
-- to the keys dueKey, jobKey and wakeKey, and returns its result: no
-- tables, one HSETNX decides and writes (a ZSCORE of takenKey first).
local function one(dueKey, jobKey, wakeKey, takenKey, o)
  local sc = tonumber(redis.call('ZSCORE', takenKey, ARGV[o + 1]))
  if sc and sc >= takenFloor and redis.call('HEXISTS', jobKey, ARGV[o + 1]) == 0 then
    return -(FINISHED + sc)
  end
  local d, ds = due(tonumber(ARGV[o + 2]), ARGV[o + 2])
  -- envelope: version|attempt|max|enqueued|run|errlen|err|payload
  if redis.call('HSETNX', jobKey, ARGV[o + 1],
      '1|0|' .. ARGV[o + 3] .. '|' .. nows .. '|' .. ds .. '|0||' .. ARGV[o + 4]) == 0 then
    return -waitingDue(dueKey, ARGV[o + 1])
  end
  redis.call('ZADD', dueKey, ds, ARGV[o + 1])
  -- First in the ZSET and no other entry at the same time: it is earlier
  -- than the previous head. An integer reply is cheaper than reading the
  -- head's score before the ZADD.
  if redis.call('ZRANK', dueKey, ARGV[o + 1]) == 0 and redis.call('ZCOUNT', dueKey, ds, ds) == 1 then
    redis.call('PUBLISH', wakeKey, ds)
  end
  return d
end

-- The modes are characters no id has: ARGV[1] of a plain call is an id.
if ARGV[1] == '+' or ARGV[1] == '~' or ARGV[1] == '%' then
  local out = {}
  local o = 2
  local ordered = ARGV[1] == '%'
  local levels = ordered or ARGV[1] == '~'
  local step = ordered and 13 or (levels and 8 or 4)
  local entries = {}
  for g = 1, #KEYS, step do
    local n = tonumber(ARGV[o])
    local prioKey, priKey, level = nil, nil, nil
    if levels then
      -- ARGV[o + 1] is the group's priority: its jobs start one later.
      o = o + 1
      level = ARGV[o]
      local l = tonumber(level)
      prioKey = KEYS[g + 4]
      if l > 0 then priKey = KEYS[g + 4 + l] end
    end
    local base = #out
    enqueue(KEYS[g], KEYS[g + 1], KEYS[g + 2], KEYS[g + 3], o, n, out, prioKey, priKey, level)
    o = o + 1 + 4 * n
    if ordered then
      local O = {due = KEYS[g], job = KEYS[g + 1], wake = KEYS[g + 2], prio = KEYS[g + 4],
        pri = {KEYS[g + 5], KEYS[g + 6], KEYS[g + 7]}, lease = KEYS[g + 8], okey = KEYS[g + 9],
        ohold = KEYS[g + 10], oq = KEYS[g + 11], oseq = KEYS[g + 12]}
      for k = 1, n do
        local key = ARGV[o + 2 * k - 2]
        -- created (a due time) and of a key; a duplicate within the batch
        -- answers -due, so each id enters once. Entered once every group
        -- is written, in the caller's order (ARGV[o + 2k - 1]), so that a
        -- key's jobs of several priorities keep their enqueue order.
        if key ~= '' and out[base + k] > 0 then
          entries[#entries + 1] = {tonumber(ARGV[o + 2 * k - 1]), O, ARGV[o - 4 * n + k - 1], key, out[base + k]}
        end
      end
      o = o + 2 * n
    end
  end
  table.sort(entries, function(a, b) return a[1] < b[1] end)
  for _, e in ipairs(entries) do ordEnter(e[2], e[3], e[4], e[5]) end
  return out
end

local n = #ARGV / 4
if n == 1 then
  -- One job, the common call.
  return one(KEYS[1], KEYS[2], KEYS[3], KEYS[4], 0)
end

local out = {}
enqueue(KEYS[1], KEYS[2], KEYS[3], KEYS[4], 0, n, out)
return out
