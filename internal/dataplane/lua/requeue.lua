-- requeue.lua: give dead jobs a fresh set of attempts, due now.
--
-- KEYS[1]  dead ZSET
-- KEYS[2]  due ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  wake channel
-- KEYS[5]  cancel HASH (cancelrun.lua's marks): a requeued job keeps its
--          enqueued time, so an old ask's mark would match its new runs
-- KEYS[6]  prio HASH (id -> priority 1-3), KEYS[7..9] pri ZSETs of
--          priority 1-3: a job of raised priority goes back to its level's
-- KEYS[10..13] okey HASH, ohold HASH, oq ZSET, oseq STRING (per-key
--          ordering, ordering.lua), KEYS[14] lease ZSET: a job of a key
--          takes it, or is parked behind its holder
-- ARGV[1]  "one" or "all"
-- ARGV[2]  with "one": the job id; with "all": the most jobs to move
--
-- Returns  how many jobs were moved. The last error stays in the envelope
--          for the record; the attempt count starts again from zero.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids
if ARGV[1] == 'one' then
  ids = {ARGV[2]}
else
  ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)
end
local n = 0
local prios = #ids > 0 and redis.call('EXISTS', KEYS[6]) == 1
local ordered = #ids > 0 and redis.call('EXISTS', KEYS[10]) == 1
local O = {due = KEYS[2], lease = KEYS[14], job = KEYS[3], prio = KEYS[6], pri = {KEYS[7], KEYS[8], KEYS[9]},
  okey = KEYS[10], ohold = KEYS[11], oq = KEYS[12], oseq = KEYS[13], wake = KEYS[4]}
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    local env = redis.call('HGET', KEYS[3], id)
    if env then
      local max, enq, rest = string.match(env, '^1|%d+|(%d+)|(%d+)|%d+|()')
      redis.call('HSET', KEYS[3], id, '1|0|' .. max .. '|' .. enq .. '|' .. now .. '|' .. string.sub(env, rest))
      redis.call('ZADD', KEYS[2], now, id)
      local l = prios and redis.call('HGET', KEYS[6], id)
      if l then redis.call('ZADD', KEYS[6 + tonumber(l)], now, id) end
      redis.call('HDEL', KEYS[5], id)
      local key = ordered and ordInfo(O, id)
      if key then ordEnter(O, id, key, now) end
      n = n + 1
    end
  end
end
if n > 0 then redis.call('PUBLISH', KEYS[4], now) end
return n
