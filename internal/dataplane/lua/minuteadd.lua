-- minuteadd.lua: add one process's counts of one minute to a topic's
-- per-minute hash (the dashboard's 24-hour charts, docs/design.md §4.20).
--
-- KEYS[1]  min HASH of one hour ("<ns>:{<topic>}:min:<epoch hour>"): field
--          "<minute of the hour>:<counter>" -> count
-- ARGV[1]  the minute of the hour, 0-59
-- ARGV[2]  enqueued to add
-- ARGV[3]  done (completed) to add
-- ARGV[4]  retried to add
-- ARGV[5]  dead to add
-- ARGV[6]  the backlog sampled in that minute, or -1 for none (it is set,
--          not added: every process samples the same Redis)
-- ARGV[7]  the hash's TTL, seconds
--
-- Returns  1
local m = ARGV[1] .. ':'
local names = {'e', 'd', 'r', 'x'}
for i, name in ipairs(names) do
  local n = tonumber(ARGV[i + 1])
  if n > 0 then
    redis.call('HINCRBY', KEYS[1], m .. name, n)
  end
end
if tonumber(ARGV[6]) >= 0 then
  redis.call('HSET', KEYS[1], m .. 'b', ARGV[6])
end
redis.call('EXPIRE', KEYS[1], ARGV[7])
return 1
