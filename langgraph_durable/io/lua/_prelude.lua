-- Shared prelude, prepended to every script by langgraph_durable/scripts.py.
-- KEYS of every thread script, in this order (langgraph_durable.core.keys.ThreadKeys):
--   1 cps  2 wix  3 cp  4 wr  5 bl  6 runs  7 qt  8 lg  9 lgx  10 sub  11 el  12 gen
--   13 head (ThreadKeys.all), then for write scripts 14 the lease and 15 the fence (see
--   lease.lua; for_writes), and
-- for scripts that move keys of the wrong type aside, the "damaged" twin of each of the
-- thirteen at TWIN + i (with_twins), so a write never fails on a damaged key and never
-- destroys its contents. Write scripts get the twins only once they need them: they
-- answer LGD_REPAIR and the caller sends them again with the twins.
local K_CPS, K_WIX, K_CP, K_WR, K_BL, K_RUNS, K_QT, K_LG, K_LGX, K_SUB = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
local K_EL, K_GEN, K_HEAD = 11, 12, 13
local K_LEASE, K_FENCE = 14, 15
local TWIN = K_FENCE

-- A checkpoint member is  ns SEP id; its timeline member (the sub index, keys.py) is
-- id SEP ns. Neither escaped part holds a SEP, so the last SEP of a checkpoint member and
-- the first of a timeline member split them, and each function undoes the other even for
-- a malformed member (a member without SEP maps to itself). Root checkpoints (ns "")
-- have no timeline member: nil.
local function timeline_of(member)
  local cut = string.find(member, '%z[^%z]*$')
  if cut == 1 then return nil end
  if not cut then return member end
  return string.sub(member, cut + 1) .. '\0' .. string.sub(member, 1, cut - 1)
end

local function member_of(timeline)
  local cut = string.find(timeline, '\0', 1, true)
  if not cut then return timeline end
  return string.sub(timeline, cut + 1) .. '\0' .. string.sub(timeline, 1, cut - 1)
end

-- Refresh the TTL of every key of the thread, so nothing the thread still references
-- (an old channel value of the newest checkpoint) expires before the thread does. A
-- thread waiting on an interrupt() keeps its keys until answered: its checkpoint hash
-- then has no expiry (persist), which only the next checkpoint write ends (arm).
-- The lease and the fence keep their own expiry (lease.lua).
local function arm(ttl)
  if ttl == '0' then return end  -- none: told without parsing a number (~1,400 instructions)
  ttl = tonumber(ttl)
  if ttl and ttl > 0 then
    for i = 1, K_LEASE - 1 do redis.call('EXPIRE', KEYS[i], ttl) end
  end
end

local function touch(ttl)
  if ttl == '0' then return end
  local seconds = tonumber(ttl)
  if seconds and seconds > 0 and redis.call('PTTL', KEYS[K_CP]) ~= -1 then arm(seconds) end
end

local function persist()
  for i = 1, K_LEASE - 1 do redis.call('PERSIST', KEYS[i]) end
end

-- A write that may name a value or an element moves the thread's generation, so a
-- retention deletion planned before it does nothing (delete_checkpoints.lua). A missing
-- generation (a new thread, or its key evicted or deleted) starts from the server's
-- clock in microseconds, never from a number a plan may have read before. So does a
-- damaged one (not an integer, or out of range): it holds nothing but that number, and
-- every write would fail on it. One of the wrong type fails here, and `repairing` moves
-- it aside.
local function next_generation()
  local ok, n = pcall(redis.call, 'INCR', KEYS[K_GEN])
  if ok and n ~= 1 then return end
  if not ok and redis.call('TYPE', KEYS[K_GEN]).ok ~= 'string' then error(n) end
  local now = redis.call('TIME')
  redis.call('SET', KEYS[K_GEN], now[1] .. string.format('%06d', now[2]))
end

-- A refusal decided from what this server holds means something only where writes go:
-- a replica (a demoted primary a stale connection still reaches, one restarted from its
-- disk) holds an older state. There its READONLY is the answer (the client rides it out
-- like any demotion and asks for the primary again), found by a write that changes
-- nothing (no checkpoint member is empty: nothing removed, nothing replicated; ZREM is
-- in the documented minimal ACL). The message, or nil.
local function not_writable()
  local res = redis.pcall('ZREM', KEYS[K_CPS], '')
  if type(res) == 'table' and res.err and string.find(res.err, 'READONLY', 1, true) then
    return (string.gsub(res.err, '^%-', ''))
  end
  return nil
end

-- The value of STRING key i (false if none), or nil and true if it holds another type.
local function string_at(i)
  local ok, value = pcall(redis.call, 'GET', KEYS[i])
  if ok then return value, false end
  return nil, true
end

-- One writer per thread. A write carrying a fencing token is accepted only while that
-- token is the newest handed out for the thread; a write without one only while no
-- worker holds the lease. A lease or fence key of the wrong type (damage) refuses both,
-- typed: the next acquire (lease.lua) sets them right. Returns the error to reply with
-- (on a replica, not_writable's READONLY instead), or nil to go ahead. One function,
-- with no helper of its own: Redis makes every closure of a script anew at each call.
local function fence_denial(token)
  local denial
  if token == '' then
    local ok, holder = pcall(redis.call, 'GET', KEYS[K_LEASE])
    if not ok then
      denial = 'LGD_LEASED ? -1'
    elseif holder then
      denial = 'LGD_LEASED ' .. string.gsub(holder, '%z.*', '') .. ' ' .. redis.call('PTTL', KEYS[K_LEASE])
    end
  else
    local ok, newest = pcall(redis.call, 'GET', KEYS[K_FENCE])
    if not ok then newest = nil end
    if newest ~= token then denial = 'LGD_FENCED ' .. token .. ' ' .. (newest or 'none') end
  end
  return denial and (not_writable() or denial)
end

-- redis.call(verb, key, t[from], ..., t[to]) in as few calls as Lua can make: one for
-- up to 4,000 arguments (unpack fails past ~8,000, LUAI_MAXCSTACK), more beyond, each
-- taking whole pairs (field value, or score member). A command a field costs Redis
-- more in Lua than the field itself.
local function in_pairs_call(verb, key, t, from, to)
  for first = from, to, 4000 do
    redis.call(verb, key, unpack(t, first, math.min(first + 3999, to)))
  end
end

-- Members of the writes of checkpoint `member` are exactly [member.."\0", member.."\1").
local function writes_of(member)
  return redis.call('ZRANGEBYLEX', KEYS[K_WIX], '[' .. member .. '\0', '(' .. member .. '\1')
end

-- Whether checkpoint `member` has an interrupt() pending write: its index is LangGraph's
-- WRITES_IDX_MAP[INTERRUPT] (-3), stored offset by 2^31 (keys.py write_member).
local function interrupted(member)
  local idx = '\0002147483645'  -- a constant, not a string built at every call
  for _, wm in ipairs(writes_of(member)) do
    if string.sub(wm, -#idx) == idx then return true end
  end
  return false
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

-- Index keys whose hash holds records they lack: the index was evicted, expired apart
-- or lost in a bad restore. Every hash field is its own index member (keys.py), so the
-- index can be rebuilt from the hash (reindex.lua). Two O(1) counts per read; a record
-- missing from an index that also keeps members of lost records shows up once those
-- members are dropped, which the read that meets them does.
-- The counts also tell which of the four keys are usable: only a key of the wrong type
-- fails them (reported in wrongtype, in ThreadKeys order), so a read asks no TYPE of
-- them. Returns the list, then whether cps, cp, and both writes keys are usable.
local function unindexed()
  local cps_ok, n_cps = pcall(redis.call, 'ZCARD', KEYS[K_CPS])
  local wix_ok, n_wix = pcall(redis.call, 'ZCARD', KEYS[K_WIX])
  local cp_ok, n_cp = pcall(redis.call, 'HLEN', KEYS[K_CP])
  local wr_ok, n_wr = pcall(redis.call, 'HLEN', KEYS[K_WR])
  local out = {}
  if not cps_ok then wrongtype[#wrongtype + 1] = KEYS[K_CPS] end
  if not wix_ok then wrongtype[#wrongtype + 1] = KEYS[K_WIX] end
  if not cp_ok then wrongtype[#wrongtype + 1] = KEYS[K_CP] end
  if not wr_ok then wrongtype[#wrongtype + 1] = KEYS[K_WR] end
  if cp_ok and cps_ok and n_cp > n_cps then out[#out + 1] = 'cps' end
  if wr_ok and wix_ok and n_wr > n_wix then out[#out + 1] = 'wix' end
  return out, cps_ok, cp_ok, wix_ok and wr_ok
end

-- The type of each of the thirteen keys, in ThreadKeys order.
local KEY_TYPES = 'zset zset hash hash hash hash hash hash zset zset hash string hash'

-- Before writing: move every key of the wrong type to its "damaged" twin. The twin gets
-- the thread's ttl (seconds, 0 for none): RENAME keeps the source's, which may be none.
-- The types are read from a string constant here, where a repair needs them: a table of
-- them would be made at every call of every script that can repair.
local function repair(ttl)
  ttl = tonumber(ttl) or 0
  local i = 0
  for want in string.gmatch(KEY_TYPES, '%a+') do
    i = i + 1
    local t = redis.call('TYPE', KEYS[i]).ok
    if t ~= want and t ~= 'none' then
      redis.call('RENAME', KEYS[i], KEYS[TWIN + i])
      if ttl > 0 then redis.call('EXPIRE', KEYS[TWIN + i], ttl) end
    end
  end
end

-- Run the idempotent writes `fn`; if one fails (a key of the wrong type), move such keys
-- aside and run them again. Cheaper than checking every key's type before each write.
-- False when that needs the twins and the caller did not send them (reply LGD_REPAIR).
local function repairing(fn, ttl)
  if pcall(fn) then return true end
  if #KEYS < TWIN + 13 then return false end
  repair(ttl)
  fn()
  return true
end
