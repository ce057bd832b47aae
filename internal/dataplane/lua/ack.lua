-- ack.lua: forget jobs whose handler succeeded, or whose run ended
-- cancelled.
--
-- KEYS[1]  lease ZSET
-- KEYS[2]  due ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  gone ZSET (tombstones, docs/design.md §4.11)
-- KEYS[5]  runs HASH (id -> runs that ended in a failure): the job's field
--          goes with it (only a job claimed more than once can have one)
-- KEYS[6]  cancel HASH: when the jobs end as cancelled while running (a
--          cancel was asked, cancelrun.lua), the removed jobs' marks go
--          with them
-- KEYS[7]  taken ZSET (the uniqueness window, §4.2.1): id -> (taken
--          until, ms) × 4 + how the job ended (0 succeeded, 1 cancelled)
-- KEYS[8]  prio HASH (id -> priority 1-3), KEYS[9..11] pri ZSETs of
--          priority 1-3: the job's priority goes with it
-- KEYS[12..15] okey HASH, ohold HASH, oq ZSET, oseq STRING (per-key
--          ordering, ordering.lua), KEYS[16] wake channel: a job that held
--          its key hands it to the key's next job
-- ARGV[1]  tombstone TTL in ms for a durable topic, 0 otherwise: a removed
--          job of a durable topic gets a tombstone (id -> now), so a relay
--          or recovery pass that read its row just before cannot restore
--          it; tombstones older than the TTL are trimmed here
-- ARGV[2]  "s" the jobs succeeded, "c" their runs ended cancelled
-- ARGV[3]  the topic's uniqueness window in ms, 0 for none: a removed job's
--          id is taken until now + it; ids whose window ended are trimmed
-- ARGV[4..] pairs: id, attempt (the claim being acknowledged)
--
-- Returns  the number of jobs removed.
--
-- Fenced by attempt: if the job was claimed again since (its lease expired
-- and another worker took it), that newer claim owns it and this ack is a
-- no-op. A job whose lease expired but that nobody claimed yet is still this
-- claim's and is removed from due as well.
local ttl = tonumber(ARGV[1])
local cancelled = ARGV[2] == 'c'
local window = tonumber(ARGV[3])
local now = nil
if ttl > 0 or window > 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local takenScore = window > 0 and ((now + window) * 4 + (cancelled and 1 or 0)) or nil
local done = 0
local prios = redis.call('EXISTS', KEYS[8]) == 1
local ordered = redis.call('EXISTS', KEYS[12]) == 1
local O = {due = KEYS[2], lease = KEYS[1], job = KEYS[3], prio = KEYS[8], pri = {KEYS[9], KEYS[10], KEYS[11]},
  okey = KEYS[12], ohold = KEYS[13], oq = KEYS[14], oseq = KEYS[15], wake = KEYS[16]}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  local env = redis.call('HGET', KEYS[3], id)
  if env and string.match(env, '^1|(%d+)|') == ARGV[i + 1] then
    local score = ordered and tonumber(redis.call('ZSCORE', KEYS[2], id))
    local n = redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[2], id)
    if n > 0 then
      redis.call('HDEL', KEYS[3], id)
      local l = prios and redis.call('HGET', KEYS[8], id)
      if l then
        redis.call('ZREM', KEYS[8 + tonumber(l)], id)
        redis.call('HDEL', KEYS[8], id)
      end
      if ARGV[i + 1] ~= '1' then redis.call('HDEL', KEYS[5], id) end
      if ttl > 0 then redis.call('ZADD', KEYS[4], now, id) end
      if cancelled then redis.call('HDEL', KEYS[6], id) end
      if takenScore then redis.call('ZADD', KEYS[7], takenScore, id) end
      if ordered then ordLeave(O, id, false, score) end
      done = done + 1
    end
  end
end
if ttl > 0 and done > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. (now - ttl))
end
if takenScore and done > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', (now + 1) * 4 - 1)
end
return done
