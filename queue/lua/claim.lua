-- claim.lua: lease up to N due jobs to the caller.
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET (id -> lease deadline, Unix ms)
-- KEYS[3]  job HASH
-- KEYS[4]  dead ZSET (id -> time of death, Unix ms)
-- KEYS[5]  paused STRING (exists = the operator paused the topic)
-- KEYS[6]  rate HASH (the rate limit's token bucket; unused here)
-- ARGV[1]  N, the most jobs to hand out
-- ARGV[2]  lease length, ms
-- ARGV[3]  the most expired leases to put back in this call
-- ARGV[4]  rate limit, handler starts per second (0 = none; unused here)
-- ARGV[5]  burst, tokens (unused here)
--
-- Returns  {now, next_due, next_lease, {id, envelope, ...}, {id, envelope, ...}, paused, next_token}
--          next_due: earliest due time still waiting (-1 if none);
--          next_lease: earliest lease deadline (-1 if none);
--          then the claimed jobs (attempt already bumped) and the jobs
--          buried instead of handed out;
--          paused: 1 when the topic is paused: nothing was claimed;
--          next_token: -1 (no rate limit here).
--
-- Expired leases go back first, at their lease deadline, so a dead worker's
-- jobs run again before newer ones. A job already claimed max-attempts times
-- that comes round again (its worker died each time) is buried, not handed
-- out: a poison job that kills its worker must not loop forever.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
local leaseUntil = now + tonumber(ARGV[2])

local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[3]))
for i = 1, #expired, 2 do
  redis.call('ZREM', KEYS[2], expired[i])
  redis.call('ZADD', KEYS[1], expired[i + 1], expired[i])
end

-- A paused topic hands out nothing. The check is here, in the same atomic
-- step as the claim, so a pause holds for every worker from the instant
-- its key is written. Expired leases still went back to due above: a
-- paused topic's jobs wait in one place.
local paused = redis.call('EXISTS', KEYS[5])

local claimed, buried = {}, {}
local ids = {}
if paused == 0 then
  ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, n)
end
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local env = redis.call('HGET', KEYS[3], id)
  if env then
    local attempt, tail, max, rest = string.match(env, '^1|(%d+)|()(%d+)|()')
    attempt, max = tonumber(attempt), tonumber(max)
    if attempt >= max then
      local enq, run, elen, p = string.match(env, '^(%d+)|(%d+)|(%d+)|()', rest)
      local err = 'lease expired ' .. attempt .. ' times: worker died or hung (max attempts ' .. max .. ')'
      env = '1|' .. attempt .. '|' .. max .. '|' .. enq .. '|' .. run .. '|' .. #err .. '|' .. err .. '|' ..
        string.sub(env, p + tonumber(elen) + 1)
      redis.call('HSET', KEYS[3], id, env)
      redis.call('ZADD', KEYS[4], now, id)
      buried[#buried + 1] = id
      buried[#buried + 1] = env
    else
      env = '1|' .. (attempt + 1) .. '|' .. string.sub(env, tail)
      redis.call('HSET', KEYS[3], id, env)
      redis.call('ZADD', KEYS[2], leaseUntil, id)
      claimed[#claimed + 1] = id
      claimed[#claimed + 1] = env
    end
  end
  -- a due entry without an envelope is debris of a partial delete: dropped
end

local nextDue, nextLease = -1, -1
local h = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if h[2] then nextDue = tonumber(h[2]) end
h = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if h[2] then nextLease = tonumber(h[2]) end
return {now, nextDue, nextLease, claimed, buried, paused, -1}
