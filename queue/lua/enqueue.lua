-- enqueue.lua: add jobs to a topic unless their id is already known.
--
-- KEYS[1]  due ZSET   (id -> due time, Unix ms)
-- KEYS[2]  job HASH   (id -> envelope)
-- KEYS[3]  wake channel, published to when the earliest due time moves earlier
-- ARGV     five per job: id, mode ("d" = delay in ms from Redis's clock,
--          "a" = absolute Unix ms), value, max attempts, payload
--
-- Returns  {now, r1, t1, r2, t2, ...}: per job r = 1 created (t = its due
--          time) or 0 duplicate (t = its due time if it is waiting, else -1).
--
-- The id is the idempotency key: a job that is due, in flight or dead keeps
-- its envelope in the job hash, so one HSETNX decides and writes. Due times come from
-- Redis's clock, so no client clock can make a job due early; a time in the
-- past means due now.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local headScore = nil
if head[2] then headScore = tonumber(head[2]) end
local earliest = nil

local out = {now}
local zargs = {}   -- one ZADD for the whole batch
local pending = {} -- id -> due, for duplicates inside this batch
for i = 1, #ARGV, 5 do
  local id = ARGV[i]
  local due
  if ARGV[i + 1] == 'd' then
    due = now + tonumber(ARGV[i + 2])
  else
    due = tonumber(ARGV[i + 2])
    if due < now then due = now end
  end
  -- envelope: version|attempt|max|enqueued|run|errlen|err|payload
  if redis.call('HSETNX', KEYS[2], id,
      '1|0|' .. ARGV[i + 3] .. '|' .. now .. '|' .. due .. '|0||' .. ARGV[i + 4]) == 1 then
    zargs[#zargs + 1] = due
    zargs[#zargs + 1] = id
    pending[id] = due
    if earliest == nil or due < earliest then earliest = due end
    out[#out + 1] = 1
    out[#out + 1] = due
  else
    local s = pending[id] or redis.call('ZSCORE', KEYS[1], id)
    out[#out + 1] = 0
    out[#out + 1] = s and tonumber(s) or -1
  end
end
-- ZADD takes at most a few thousand arguments through unpack; batches are
-- at most 1,000 jobs (2,000 arguments), chunked here all the same.
for i = 1, #zargs, 1000 do
  redis.call('ZADD', KEYS[1], unpack(zargs, i, math.min(i + 999, #zargs)))
end

if earliest ~= nil and (headScore == nil or earliest < headScore) then
  redis.call('PUBLISH', KEYS[3], earliest)
end
return out
