-- ratetake.lua: take tokens from a partitioned topic's one token bucket, or
-- give back what a claim took and did not spend.
--
-- A partition's claim.lua cannot reach a key in another slot, so a topic of
-- several partitions keeps its bucket in the slot of the topic's own name
-- (where its count-1 partition keeps it too) and each partition's claim
-- takes its tokens here first, then claims at most that many jobs with no
-- limit of its own, then gives back the tokens it did not hand out
-- (docs/design.md §4.16).
--
-- KEYS[1]  rate HASH {tokens, at}: the topic's token bucket, at in Redis ms
-- KEYS[2]  the topic's paused STRING (exists: paused, nothing is taken)
-- ARGV[1]  want: tokens to take (0: only give back)
-- ARGV[2]  rate limit, tokens a second (> 0)
-- ARGV[3]  burst: the bucket's size (at least 1)
-- ARGV[4]  give back: tokens an earlier take of this caller did not spend
-- ARGV[5]  with a give-back: that take's time, Redis µs (its reply's now_us)
-- ARGV[6]  with a give-back: the bucket's level after that take (its reply's
--          level). Had the tokens stayed, the refill since would have been
--          cut at the cap: a give-back returns at most the room the bucket
--          would have had, burst - (level + refill since, counted in the
--          bucket's whole ms), so that it never
--          lets more start than the limit allows, and returns all when
--          the cap was not reached
--
-- Returns  {granted, next_token, paused, now_us, level}
--          granted: tokens taken, at most want and floor(tokens);
--          next_token: -1, or the time (Redis ms) the next token is there
--          when fewer than want were granted;
--          paused: 1 when the topic is paused (nothing granted), else 0;
--          now_us: Redis's clock in µs (the worker's clock offset, as in
--          claim.lua's reply); level: the bucket's tokens after this call
--          (a string: a float).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local want = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local burst = math.max(tonumber(ARGV[3]), 1)
local back = tonumber(ARGV[4]) or 0
local takenAt = tonumber(ARGV[5]) or 0
local levelAfter = tonumber(ARGV[6]) or 0
local nowUs = tonumber(t[1]) * 1000000 + tonumber(t[2])
if back > 0 and takenAt > 0 then
  -- The refill since the take on the bucket's own clock (whole ms, as the
  -- take stored it): on the µs clock the room came out short by up to a
  -- millisecond's refill, and a take in the same ms saw a token missing.
  local since = math.max(0, now - math.floor(takenAt / 1000))
  local room = burst - (levelAfter + since * rate / 1000)
  back = math.min(back, math.max(0, room))
end

local tokens = burst
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
if b[1] and b[2] then
  -- As in claim.lua: a clock that went back refills nothing.
  tokens = math.min(burst, tonumber(b[1]) + math.max(0, now - tonumber(b[2])) * rate / 1000)
end
tokens = math.min(burst, tokens + back)

local paused = 0
local granted = 0
if want > 0 then
  paused = redis.call('EXISTS', KEYS[2])
  if paused == 0 then
    granted = math.min(want, math.floor(tokens))
  end
end
tokens = tokens - granted
if granted > 0 or back > 0 then
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
  redis.call('PEXPIRE', KEYS[1], math.max(1000, math.ceil(2000 * burst / rate)))
end

local nextToken = -1
if want > 0 and paused == 0 and granted < want then
  nextToken = now + math.max(0, math.ceil((1 - tokens) * 1000 / rate))
end
return {granted, nextToken, paused, nowUs, tostring(tokens)}
