-- orderheal.lua: settle one page of a topic's held ordering keys
-- (docs/design.md §4.24): the recoverer's safety net for keys a path that
-- knows nothing of them left stranded (a worker of the release before
-- ordering keys that acked or buried a key's holder, a partial delete).
-- ordering.lua is put before it.
--
-- KEYS[1]  lease ZSET
-- KEYS[2]  due ZSET
-- KEYS[3]  job HASH
-- KEYS[4]  wake channel
-- KEYS[5]  prio HASH, KEYS[6..8] pri ZSETs of priority 1-3
-- KEYS[9..12] okey HASH, ohold HASH, oq ZSET, oseq STRING
-- ARGV[1]  HSCAN cursor of ohold ("0" to start)
-- ARGV[2]  HSCAN count
--
-- Returns  {next cursor ("0": done), keys handed on}: a key whose holder is
--          neither waiting nor in flight goes to its earliest parked job (or
--          is freed); a holder that has not started gives way to a parked
--          job due before it (ordBalance).
local O = {due = KEYS[2], lease = KEYS[1], job = KEYS[3], wake = KEYS[4], prio = KEYS[5],
  pri = {KEYS[6], KEYS[7], KEYS[8]}, okey = KEYS[9], ohold = KEYS[10], oq = KEYS[11], oseq = KEYS[12]}
local page = redis.call('HSCAN', O.ohold, ARGV[1], 'COUNT', tonumber(ARGV[2]))
local healed = 0
local kv = page[2]
for i = 1, #kv, 2 do
  local key, holder = kv[i], kv[i + 1]
  ordBalance(O, key)
  if redis.call('HGET', O.ohold, key) ~= holder then healed = healed + 1 end
end
return {page[1], healed}
