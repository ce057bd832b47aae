-- release.lua: hand claimed jobs back without spending an attempt (the
-- ledger could not record them, or the worker is shutting down before their
-- handler started).
--
-- KEYS[1]  lease ZSET
-- KEYS[2]  due ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  wake channel
-- KEYS[5]  prio HASH (id -> priority 1-3), KEYS[6..8] pri ZSETs of
--          priority 1-3: a job of raised priority goes back to its level's
-- ARGV     pairs: id, attempt (the claim being released)
--
-- Returns  the number of jobs put back.
--
-- Fenced by attempt; each job goes back at its own due time (already past,
-- or within the claim-ahead of a worker that claimed it before it was
-- due), so it keeps its place in line and its lateness stays measured from when it
-- was really due.
local put, earliest = 0, nil
local prios = redis.call('EXISTS', KEYS[5]) == 1
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  local env = redis.call('HGET', KEYS[3], id)
  if env and redis.call('ZSCORE', KEYS[1], id) then
    local attempt, max, enq, run, rest = string.match(env, '^1|(%d+)|(%d+)|(%d+)|(%d+)|()')
    if attempt == ARGV[i + 1] then
      local a = tonumber(attempt) - 1
      if a < 0 then a = 0 end
      redis.call('HSET', KEYS[3], id, '1|' .. a .. '|' .. max .. '|' .. enq .. '|' .. run .. '|' .. string.sub(env, rest))
      redis.call('ZREM', KEYS[1], id)
      redis.call('ZADD', KEYS[2], run, id)
      local l = prios and redis.call('HGET', KEYS[5], id)
      if l then redis.call('ZADD', KEYS[5 + tonumber(l)], run, id) end
      put = put + 1
      local r = tonumber(run)
      if earliest == nil or r < earliest then earliest = r end
    end
  end
end
if earliest ~= nil then redis.call('PUBLISH', KEYS[4], earliest) end
return put
