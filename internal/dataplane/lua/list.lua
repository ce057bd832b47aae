-- list.lua: one page of a topic's jobs in one state, newest first for the
-- dead set, earliest first for due and lease.
--
-- KEYS[1]  the ZSET to page through (due, lease or dead)
-- KEYS[2]  job HASH
-- KEYS[3]  prio HASH (id -> priority 1-3 of a job of raised priority)
-- KEYS[4]  okey HASH (id -> "ordering key|seq", ordering.lua)
-- ARGV[1]  "asc" or "desc"
-- ARGV[2]  offset
-- ARGV[3]  page size
--
-- Returns  {total, id1, score1, envelope1, priority1, key1, id2, ...}: the
--          set's size, then per job its id, score (string), envelope (false
--          if missing), priority (0 by default) and ordering key ("" for
--          none). A job parked behind its key's holder is in due at 2^51 +
--          its due time, after every job a claim can take.
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
local ordered = #page > 0 and redis.call('EXISTS', KEYS[4]) == 1
for i = 1, #page, 2 do
  out[#out + 1] = page[i]
  out[#out + 1] = page[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], page[i])
  out[#out + 1] = prios and tonumber(redis.call('HGET', KEYS[3], page[i])) or 0
  out[#out + 1] = ordered and string.match(redis.call('HGET', KEYS[4], page[i]) or '', '^(.*)|%d+$') or ''
end
return out
