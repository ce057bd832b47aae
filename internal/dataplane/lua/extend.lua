-- extend.lua: push the lease deadline of running jobs further out.
--
-- KEYS[1]  lease ZSET
-- ARGV[1]  lease length, ms (new deadline = Redis now + this)
-- ARGV[2..] job ids
--
-- Returns  {deadline, n}: the new deadline and how many leases moved.
--
-- Only ids still leased are touched (a job acked or taken back meanwhile
-- stays gone), and a deadline is never moved earlier.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + tonumber(ARGV[1])
local n = 0
for i = 2, #ARGV do
  local s = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if s and tonumber(s) < deadline then
    redis.call('ZADD', KEYS[1], deadline, ARGV[i])
    n = n + 1
  end
end
return {deadline, n}
