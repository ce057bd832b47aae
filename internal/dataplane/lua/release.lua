-- release.lua: hand claimed jobs back without spending an attempt (the
-- ledger could not record them, or the worker is shutting down before their
-- handler started).
--
-- KEYS[1]  lease ZSET
-- KEYS[2]  due ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  wake channel
-- KEYS[5]  prio HASH (id -> priority 1-3), KEYS[6..8] pri ZSETs of
--          priority 1-3: a job of raised priority goes back to its level's
-- KEYS[9..12] okey HASH, ohold HASH, oq ZSET, oseq STRING: per-key
--          ordering (ordering.lua)
-- ARGV     pairs: id, attempt (the claim being released); or "@", a wait
--          in ms, a count m, m pairs (id, the id of the job the ledger
--          holds its ordering key for), then the pairs: the jobs go back
--          at now + the wait (the ledger said another job of the key is in
--          flight or retrying, docs/design.md §4.24); a job whose key's
--          ledger holder is parked here hands it the key and waits in the
--          key's order at its own due time, any other keeps the key
--
-- Returns  the number of jobs put back.
--
-- Fenced by attempt; each job goes back at its own due time (already past,
-- or within the claim-ahead of a worker that claimed it before it was
-- due), so it keeps its place in line and its lateness stays measured from when it
-- was really due.
local put, earliest = 0, nil
local prios = redis.call('EXISTS', KEYS[5]) == 1
local from, later = 1, nil
local by = {}
if ARGV[1] == '@' then
  local t = redis.call('TIME')
  later = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[2])
  local nb = tonumber(ARGV[3])
  for j = 4, 3 + 2 * nb, 2 do by[ARGV[j]] = ARGV[j + 1] end
  from = 4 + 2 * nb
end
local O = {due = KEYS[2], lease = KEYS[1], job = KEYS[3], wake = KEYS[4], prio = KEYS[5],
  pri = {KEYS[6], KEYS[7], KEYS[8]}, okey = KEYS[9], ohold = KEYS[10], oq = KEYS[11], oseq = KEYS[12]}
for i = from, #ARGV, 2 do
  local id = ARGV[i]
  local env = redis.call('HGET', KEYS[3], id)
  if env and redis.call('ZSCORE', KEYS[1], id) then
    local attempt, max, enq, run, rest = string.match(env, '^1|(%d+)|(%d+)|(%d+)|(%d+)|()')
    if attempt == ARGV[i + 1] then
      local a = tonumber(attempt) - 1
      if a < 0 then a = 0 end
      redis.call('HSET', KEYS[3], id, '1|' .. a .. '|' .. max .. '|' .. enq .. '|' .. run .. '|' .. string.sub(env, rest))
      if later then run = later end
      redis.call('ZREM', KEYS[1], id)
      redis.call('ZADD', KEYS[2], run, id)
      local l = prios and redis.call('HGET', KEYS[5], id)
      if l then redis.call('ZADD', KEYS[5 + tonumber(l)], run, id) end
      -- The ledger's holder of the key, parked here (Redis lost or
      -- missed its hold), takes the key back, whether or not this job
      -- started; this job waits in the key's order at its own due time.
      -- Otherwise it keeps the key: its place in the order is its due
      -- time, not now + the wait.
      local key, seq = nil, nil
      if later then key, seq = ordInfo(O, id) end
      local hid = key and by[id]
      local hs = hid and tonumber(redis.call('ZSCORE', KEYS[2], hid))
      if hs and hs >= PARK and redis.call('HGET', O.ohold, key) == id then
        local _, hseq = ordInfo(O, hid)
        if hseq then
          ordPark(O, id, key, seq, tonumber(string.match(env, '^1|%d+|%d+|%d+|(%d+)|')))
          ordTake(O, key, hid, hs - PARK, ordMember(key, hs - PARK, hseq, hid))
        end
      end
      put = put + 1
      local r = tonumber(run)
      if earliest == nil or r < earliest then earliest = r end
    end
  end
end
if earliest ~= nil then redis.call('PUBLISH', KEYS[4], earliest) end
return put
