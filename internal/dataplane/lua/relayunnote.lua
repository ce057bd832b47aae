-- relayunnote.lua: an enqueue whose SQL statements failed, or that has no
-- job to push (duplicates, or all beyond the horizon), takes back the note
-- it wrote for the relay, and the bell's ring with it when no other note
-- is left, so that a refused enqueue leaves nothing in Redis. A ring
-- another enqueuer made for a note still in the inbox stays: this script
-- runs atomically between (or around) that enqueuer's ZADD and RPUSH.
--
-- KEYS[1] <ns>:{relay}:inbox
-- KEYS[2] <ns>:{relay}:bell
-- ARGV[1] the note (member of the inbox)
-- returns 1
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
end
return 1
