-- periodic.lua: claim one tick of a periodic schedule and enqueue its job,
-- atomically, so that a tick is enqueued once however many processes run
-- the schedule and however late one of them is.
--
-- KEYS[1]  due ZSET    (id -> due time, Unix ms)
-- KEYS[2]  job HASH    (id -> envelope)
-- KEYS[3]  wake channel, published to when the earliest due time moves earlier
-- KEYS[4]  ticks HASH  (schedule name -> last tick enqueued, Unix ms)
-- KEYS[5]  prio HASH (id -> priority 1-3), KEYS[6..8] pri ZSETs of
--          priority 1-3: a job of raised priority is written to both
-- ARGV[1]  schedule name (the ticks field)
-- ARGV[2]  the tick, Unix ms
-- ARGV[3]  the job id ("<name>:<tick>")
-- ARGV[4]  due time, absolute Unix ms (a time in the past means due now)
-- ARGV[5]  max attempts
-- ARGV[6]  payload
-- ARGV[7]  priority, 0-3
--
-- Returns  {code, value}:
--          {1, t}    the tick was claimed and the job created, due at t;
--          {0, last} a duplicate: the schedule's last tick is last >= the tick
--                    (another process enqueued it, or a later one);
--          {2, 0}    the tick was claimed but the job id was known already
--                    (still waiting, in flight or dead): nothing else written.
--
-- The ticks field is what decides, not the job id: a job that already ran
-- and was acked is gone from the job hash, so a process that comes late to
-- a tick would enqueue it again if only the id were checked. The enqueue is
-- enqueue.lua's single-job path.
local last = tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '-1')
local tick = tonumber(ARGV[2])
if last >= tick then
  return {0, last}
end
redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])

local t = redis.call('TIME')
local us = t[2]
local ms = #us > 3 and string.sub(us, 1, -4) or '0'
local now = t[1] * 1000 + ms
local nows = t[1] .. string.sub('00' .. ms, -3)
local d, ds = tonumber(ARGV[4]), ARGV[4]
if d <= now then d, ds = now, nows end
-- envelope: version|attempt|max|enqueued|run|errlen|err|payload
if redis.call('HSETNX', KEYS[2], ARGV[3],
    '1|0|' .. ARGV[5] .. '|' .. nows .. '|' .. ds .. '|0||' .. ARGV[6]) == 0 then
  return {2, 0}
end
redis.call('ZADD', KEYS[1], ds, ARGV[3])
local l = tonumber(ARGV[7]) or 0
if l > 0 then
  redis.call('HSET', KEYS[5], ARGV[3], l)
  redis.call('ZADD', KEYS[5 + l], ds, ARGV[3])
end
if redis.call('ZRANK', KEYS[1], ARGV[3]) == 0 and redis.call('ZCOUNT', KEYS[1], ds, ds) == 1 then
  redis.call('PUBLISH', KEYS[3], ds)
end
return {1, d}
