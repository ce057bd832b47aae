-- extend.lua: push the lease deadline of running jobs further out.
--
-- KEYS[1]  lease ZSET
-- KEYS[2]  job HASH
-- KEYS[3]  cancel HASH (cancelrun.lua's marks)
-- ARGV[1]  lease length, ms (new deadline = Redis now + this)
-- ARGV[2..] job ids
--
-- Returns  {deadline, n, {id, ...}}: the new deadline, how many leases
--          moved, and the ids whose cancel was asked (their worker may
--          have missed the message on the wake channel: a reconnect).
--
-- Only ids still leased are touched (a job acked or taken back meanwhile
-- stays gone), and a deadline is never moved earlier. The marks are read
-- only while the cancel hash exists, which is seldom.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + tonumber(ARGV[1])
local n = 0
local asked = {}
local marks = redis.call('EXISTS', KEYS[3]) == 1
for i = 2, #ARGV do
  local id = ARGV[i]
  local s = redis.call('ZSCORE', KEYS[1], id)
  if s and tonumber(s) < deadline then
    redis.call('ZADD', KEYS[1], deadline, id)
    n = n + 1
  end
  if s and marks then
    local mark = redis.call('HGET', KEYS[3], id)
    if mark then
      local env = redis.call('HGET', KEYS[2], id)
      -- The mark is this job's when it names its envelope's enqueued time.
      if env and string.match(mark, '^(%d+)|') == string.match(env, '^%d+|%d+|%d+|(%d+)|') then
        asked[#asked + 1] = id
      end
    end
  end
end
return {deadline, n, asked}
