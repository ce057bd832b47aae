-- retry.lua: put failed claims back in due for another attempt.
--
-- KEYS[1]  lease ZSET
-- KEYS[2]  due ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  wake channel
-- KEYS[5]  runs HASH (id -> runs that ended in a failure): each job retried
--          here counts one more
-- KEYS[6]  prio HASH (id -> priority 1-3), KEYS[7..9] pri ZSETs of
--          priority 1-3: a job of raised priority goes back to its level's
-- ARGV     five per job: id, attempt, mode ("d" = delay ms from Redis's
--          clock, "a" = absolute Unix ms), value, error text
--
-- Returns  {now, t1, t2, ...}: per job its new due time, or -1 when the claim
--          no longer owns the job (fenced by attempt) and nothing changed.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local headScore = nil
if head[2] then headScore = tonumber(head[2]) end
local earliest = nil
local prios = redis.call('EXISTS', KEYS[6]) == 1

local out = {now}
for i = 1, #ARGV, 5 do
  local id = ARGV[i]
  local due = -1
  local env = redis.call('HGET', KEYS[3], id)
  if env and redis.call('ZSCORE', KEYS[1], id) then
    local attempt, max, enq, run, elen, p = string.match(env, '^1|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)|()')
    if attempt == ARGV[i + 1] then
      if ARGV[i + 2] == 'd' then
        due = now + tonumber(ARGV[i + 3])
      else
        due = tonumber(ARGV[i + 3])
        if due < now then due = now end
      end
      local err = ARGV[i + 4]
      redis.call('HSET', KEYS[3], id, '1|' .. attempt .. '|' .. max .. '|' .. enq .. '|' .. due .. '|' ..
        #err .. '|' .. err .. '|' .. string.sub(env, p + tonumber(elen) + 1))
      redis.call('ZREM', KEYS[1], id)
      redis.call('ZADD', KEYS[2], due, id)
      local l = prios and redis.call('HGET', KEYS[6], id)
      if l then redis.call('ZADD', KEYS[6 + tonumber(l)], due, id) end
      redis.call('HINCRBY', KEYS[5], id, 1)
      if earliest == nil or due < earliest then earliest = due end
    end
  end
  out[#out + 1] = due
end

if earliest ~= nil and (headScore == nil or earliest < headScore) then
  redis.call('PUBLISH', KEYS[4], earliest)
end
return out
