-- Shared prelude, prepended to every script by langgraph_durable/scripts.py.
-- KEYS of every thread script, in this order (langgraph_durable.keys.ThreadKeys.all):
--   1 cps  2 wix  3 cp  4 wr  5 bl  6 runs  7 qt  8 lg  9 lgx
-- Write scripts get as many more (ThreadKeys.damaged): where each key goes if it holds the
-- wrong type, so a write never fails on a damaged key and never destroys its contents.
local K_CPS, K_WIX, K_CP, K_WR, K_BL, K_RUNS, K_QT, K_LG, K_LGX = 1, 2, 3, 4, 5, 6, 7, 8, 9

-- Refresh the TTL of every key of the thread, so nothing the thread still references
-- (an old channel value of the newest checkpoint) expires before the thread does.
local function touch(ttl)
  ttl = tonumber(ttl)
  if ttl and ttl > 0 then
    for i = 1, #KEYS do redis.call('EXPIRE', KEYS[i], ttl) end
  end
end

-- Members of the writes of checkpoint `member` are exactly [member.."\0", member.."\1").
local function writes_of(member)
  return redis.call('ZRANGEBYLEX', KEYS[K_WIX], '[' .. member .. '\0', '(' .. member .. '\1')
end

-- A key of the wrong type is damage (a bad restore, a stray SET): reads treat it as empty
-- and report it, instead of failing with WRONGTYPE.
local wrongtype = {}
local function usable(i, want)
  local t = redis.call('TYPE', KEYS[i]).ok
  if t == want or t == 'none' then return true end
  wrongtype[#wrongtype + 1] = KEYS[i]
  return false
end

local KEY_TYPES = {'zset', 'zset', 'hash', 'hash', 'hash', 'hash', 'hash', 'hash', 'zset'}

-- Before writing: move every key of the wrong type to its "damaged" twin.
local function repair()
  for i = 1, #KEY_TYPES do
    if not usable(i, KEY_TYPES[i]) then redis.call('RENAME', KEYS[i], KEYS[i + #KEY_TYPES]) end
  end
end
