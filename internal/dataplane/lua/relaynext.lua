-- relaynext.lua: the relay records when the next scheduled row beyond the
-- horizon enters it, after a pass that loaded every row that had entered it
-- by covered. A time an enqueuer wrote (ZADD LT) that the pass covered goes;
-- one it did not cover stays if it is earlier than next. One script, not
-- MULTI: delayq's Redis user has no transactions (deployments/README.md).
--
-- KEYS[1] <ns>:{relay}:next, a ZSET of one member, "load"
-- ARGV[1] covered: Unix ms (the relay's clock) the pass covered
-- ARGV[2] next: Unix ms the next row enters the horizon; 0 = no such row
-- returns 1
local cur = redis.call('ZSCORE', KEYS[1], 'load')
if cur and tonumber(cur) <= tonumber(ARGV[1]) then
  redis.call('ZREM', KEYS[1], 'load')
end
if ARGV[2] ~= '0' then
  redis.call('ZADD', KEYS[1], 'LT', ARGV[2], 'load')
end
return 1
