-- resume.lua: lift a topic's pause and wake its fetchers.
--
-- KEYS[1]  paused STRING ({"at":ms,"by":actor} while the topic is paused)
-- KEYS[2]  wake channel
-- ARGV[1]  0: delete the key whatever it holds (an operator's resume);
--          otherwise a time (ms, the SQL state's changed_at): delete it only
--          if the pause it holds was set before then. The relay settles a
--          resume whose Redis step failed this way, and never undoes a
--          pause set after the resume it applies.
--
-- Returns  1 if the key was deleted, 0 if it was absent or newer.
--
-- The wake goes out whenever the topic may be running again (the key was
-- deleted, or an operator's resume found it absent already), so fetchers
-- that wait for it claim at once.
local before = tonumber(ARGV[1])
local v = redis.call('GET', KEYS[1])
if not v then
  if before == 0 then redis.call('PUBLISH', KEYS[2], 0) end
  return 0
end
if before ~= 0 then
  local ok, st = pcall(cjson.decode, v)
  local at = 0
  if ok and type(st) == 'table' and tonumber(st.at) then at = tonumber(st.at) end
  if at >= before then return 0 end
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], 0)
return 1
