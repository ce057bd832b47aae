-- bury.lua: move failed claims to the dead set, keeping envelope and reason.
--
-- KEYS[1]  lease ZSET
-- KEYS[2]  due ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  dead ZSET
-- KEYS[5]  runs HASH (id -> runs that ended in a failure): the job's field
--          goes (a requeued dead job starts its count again)
-- KEYS[6]  prio HASH (id -> priority 1-3), KEYS[7..9] pri ZSETs of
--          priority 1-3: a job buried from due leaves its level's; its priority stays,
--          for a requeue
-- KEYS[10..13] okey HASH, ohold HASH, oq ZSET, oseq STRING (per-key
--          ordering, ordering.lua), KEYS[14] wake channel: a dead job frees
--          its key for the key's next job; its okey field stays, for a
--          requeue
-- ARGV     triples: id, attempt, reason
--
-- Returns  {now, n}: the time of death and how many jobs were buried.
--
-- Fenced by attempt: a claim that no longer owns the job buries nothing.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
local prios = redis.call('EXISTS', KEYS[6]) == 1
local ordered = redis.call('EXISTS', KEYS[10]) == 1
local O = {due = KEYS[2], lease = KEYS[1], job = KEYS[3], prio = KEYS[6], pri = {KEYS[7], KEYS[8], KEYS[9]},
  okey = KEYS[10], ohold = KEYS[11], oq = KEYS[12], oseq = KEYS[13], wake = KEYS[14]}
for i = 1, #ARGV, 3 do
  local id = ARGV[i]
  local env = redis.call('HGET', KEYS[3], id)
  if env then
    local attempt, max, enq, run, elen, p = string.match(env, '^1|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|()')
    local score = ordered and attempt == ARGV[i + 1] and tonumber(redis.call('ZSCORE', KEYS[2], id))
    if attempt == ARGV[i + 1] and redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[2], id) > 0 then
      local err = ARGV[i + 2]
      redis.call('HSET', KEYS[3], id, '1|' .. attempt .. '|' .. max .. '|' .. enq .. '|' .. run .. '|' ..
        #err .. '|' .. err .. '|' .. string.sub(env, p + tonumber(elen) + 1))
      redis.call('ZADD', KEYS[4], now, id)
      local l = prios and redis.call('HGET', KEYS[6], id)
      if l then redis.call('ZREM', KEYS[6 + tonumber(l)], id) end
      if attempt ~= '1' then redis.call('HDEL', KEYS[5], id) end
      if ordered then ordLeave(O, id, true, score) end
      n = n + 1
    end
  end
end
return {now, n}
