-- restore.lua: put back jobs the ledger holds and Redis has lost.
--
-- KEYS[1]  due ZSET
-- KEYS[2]  lease ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  wake channel, published to when the earliest due time moves earlier
-- ARGV[1]  "write", or "check" (dry run: decide each row, write nothing)
-- ARGV[2..] seven per row: id, mode ("p" = in progress: due at once, "r" =
--          retrying: due at its run time), run at (Unix ms), attempt, max
--          attempts, last error, payload
--
-- Returns  {now, o1, o2, ...}: per row 0 = Redis still tracks the job (in
--          due, in lease, or its envelope is in the job hash, which covers
--          dead jobs): nothing written, Redis's own lease expiry redelivers
--          it; 1 = no trace of it: envelope and due entry re-created (with
--          "check": would be).
--
-- The check and the write are one atomic step, so two recoverers running
-- over the same rows re-create each job once. The envelope keeps the row's
-- attempt (the next claim bumps it, as after a lease expiry) and last error;
-- the ledger keeps no enqueue time, so the run time stands in for it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local write = ARGV[1] == 'write'

local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local headScore = nil
if head[2] then headScore = tonumber(head[2]) end
local earliest = nil

local out = {now}
for i = 2, #ARGV, 7 do
  local id = ARGV[i]
  local tracked = redis.call('HEXISTS', KEYS[3], id) == 1
    or redis.call('ZSCORE', KEYS[1], id)
    or redis.call('ZSCORE', KEYS[2], id)
  if tracked then
    out[#out + 1] = 0
  else
    out[#out + 1] = 1
    if write then
      local run = tonumber(ARGV[i + 2])
      local due = run
      if ARGV[i + 1] == 'p' and due > now then due = now end
      local err = ARGV[i + 5]
      -- envelope: version|attempt|max|enqueued|run|errlen|err|payload
      redis.call('HSET', KEYS[3], id, '1|' .. ARGV[i + 3] .. '|' .. ARGV[i + 4] .. '|' .. run .. '|' .. due ..
        '|' .. #err .. '|' .. err .. '|' .. ARGV[i + 6])
      redis.call('ZADD', KEYS[1], due, id)
      if earliest == nil or due < earliest then earliest = due end
    end
  end
end

if earliest ~= nil and (headScore == nil or earliest < headScore) then
  redis.call('PUBLISH', KEYS[4], earliest)
end
return out
