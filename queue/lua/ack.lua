-- ack.lua: forget jobs whose handler succeeded.
--
-- KEYS[1]  lease ZSET
-- KEYS[2]  due ZSET
-- KEYS[3]  job HASH
-- ARGV     pairs: id, attempt (the claim being acknowledged)
--
-- Returns  the number of jobs removed.
--
-- Fenced by attempt: if the job was claimed again since (its lease expired
-- and another worker took it), that newer claim owns it and this ack is a
-- no-op. A job whose lease expired but that nobody claimed yet is still this
-- claim's and is removed from due as well.
local done = 0
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  local env = redis.call('HGET', KEYS[3], id)
  if env and string.match(env, '^1|(%d+)|') == ARGV[i + 1] then
    local n = redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[2], id)
    if n > 0 then
      redis.call('HDEL', KEYS[3], id)
      done = done + 1
    end
  end
end
return done
