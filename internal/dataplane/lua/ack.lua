-- ack.lua: forget jobs whose handler succeeded.
--
-- KEYS[1]  lease ZSET
-- KEYS[2]  due ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  gone ZSET (tombstones, docs/design.md §4.11)
-- KEYS[5]  runs HASH (id -> runs that ended in a failure): the job's field
--          goes with it (only a job claimed more than once can have one)
-- KEYS[6]  (optional) cancel HASH: given when the jobs end as cancelled
--          while running (a cancel was asked, cancelrun.lua); the
--          removed jobs' marks go with them
-- ARGV[1]  tombstone TTL in ms for a durable topic, 0 otherwise: a removed
--          job of a durable topic gets a tombstone (id -> now), so a relay
--          or recovery pass that read its row just before cannot restore
--          it; tombstones older than the TTL are trimmed here
-- ARGV[2..] pairs: id, attempt (the claim being acknowledged)
--
-- Returns  the number of jobs removed.
--
-- Fenced by attempt: if the job was claimed again since (its lease expired
-- and another worker took it), that newer claim owns it and this ack is a
-- no-op. A job whose lease expired but that nobody claimed yet is still this
-- claim's and is removed from due as well.
local ttl = tonumber(ARGV[1])
local now = nil
if ttl > 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local done = 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local env = redis.call('HGET', KEYS[3], id)
  if env and string.match(env, '^1|(%d+)|') == ARGV[i + 1] then
    local n = redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[2], id)
    if n > 0 then
      redis.call('HDEL', KEYS[3], id)
      if ARGV[i + 1] ~= '1' then redis.call('HDEL', KEYS[5], id) end
      if now then redis.call('ZADD', KEYS[4], now, id) end
      if KEYS[6] then redis.call('HDEL', KEYS[6], id) end
      done = done + 1
    end
  end
end
if now and done > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. (now - ttl))
end
return done
