-- relaymark.lua: the relay moves its mark at the end of a pass only if the
-- mark's key is still there (a reload creates it at its start, without a
-- mark: OpenRelayMark). A pass that began before Redis lost its data (a
-- restart without persistence, a failover) must not write the mark into the
-- empty Redis: the next tick, finding no mark, reloads the horizon, pauses
-- first, and says that Redis lost data.
--
-- KEYS[1] <ns>:relay, a HASH: loaded, checked (and reload, set by OpenRelayMark)
-- ARGV[1] loaded: Unix ms, SQL's clock
-- ARGV[2] checked: Unix ms, SQL's clock
-- returns 1 when the mark moved, 0 when it is gone
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'loaded', ARGV[1], 'checked', ARGV[2])
return 1
