-- list.lua: one page of a topic's jobs in one state, newest first for the
-- dead set, earliest first for due and lease.
--
-- KEYS[1]  the ZSET to page through (due, lease or dead)
-- KEYS[2]  job HASH
-- KEYS[3]  prio HASH (id -> priority 1-3 of a job of raised priority)
-- ARGV[1]  "asc" or "desc"
-- ARGV[2]  offset
-- ARGV[3]  page size
--
-- Returns  {total, id1, score1, envelope1, priority1, id2, ...}: the set's
--          size, then per job its id, score (string), envelope (false if
--          missing) and priority (0 by default).
local total = redis.call('ZCARD', KEYS[1])
local first, last = tonumber(ARGV[2]), tonumber(ARGV[2]) + tonumber(ARGV[3]) - 1
local page
if ARGV[1] == 'desc' then
  page = redis.call('ZREVRANGE', KEYS[1], first, last, 'WITHSCORES')
else
  page = redis.call('ZRANGE', KEYS[1], first, last, 'WITHSCORES')
end
local out = {total}
local prios = #page > 0 and redis.call('EXISTS', KEYS[3]) == 1
for i = 1, #page, 2 do
  out[#out + 1] = page[i]
  out[#out + 1] = page[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], page[i])
  out[#out + 1] = prios and tonumber(redis.call('HGET', KEYS[3], page[i])) or 0
end
return out
