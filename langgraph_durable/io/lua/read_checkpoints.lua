-- Read checkpoints with their pending writes in one call.
-- KEYS: the thread's keys (see _prelude.lua)
-- ARGV: 1 "range": 2 max bound, 3 min bound, 4 limit  (newest first, ZREVRANGEBYLEX)
--       1 "all": 2 cursor or "", 3 limit  (every namespace, newest first by id; see below)
--       1 "members": 2.. checkpoint members
-- Returns: { {keys of the wrong type...}, {index keys lacking records (see unindexed)},
--            {member, record or nil, {write member, write
--            record, ...}, 1 if the member is indexed but its record is gone else 0
--            [, "all": its timeline member, the next page's cursor]}, ... }
local lacking, cps_ok, cp_ok, writes_ok = unindexed()
local members = {}
local timelines = {}  -- "all": member -> its timeline member

-- Byte order, as ZSETs sort members: Lua's own < follows the server's LC_COLLATE.
local function before(a, b)
  for k = 1, math.min(#a, #b) do
    local x, y = string.byte(a, k), string.byte(b, k)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- "all": the checkpoints of every namespace in descending timeline-member order
-- (id SEP ns: newest id first, equal ids by namespace, descending), below the exclusive
-- cursor ARGV[2] (a timeline member, or a bare escaped id: "ids below it"). Merges the
-- root namespace's range of cps with the sub index: O(log n + limit). A sub index that
-- does not hold exactly the non-root members (written before it existed, evicted) is not
-- trusted: the script merges from cps alone, O(n), and reports it for reindex.lua.
local function newest_of_all(cursor, limit)
  local root = {}
  local subs = {}
  local n_root = redis.call('ZLEXCOUNT', KEYS[K_CPS], '[\0', '(\1')
  local sub_ok = usable(K_SUB, 'zset')
  if sub_ok and redis.call('ZCARD', KEYS[K_SUB]) == redis.call('ZCARD', KEYS[K_CPS]) - n_root then
    local root_upper, sub_upper = '(\1', '+'
    if cursor ~= '' then
      sub_upper = '(' .. cursor
      local cut = string.find(cursor, '\0', 1, true)
      if not cut then
        root_upper = '(\0' .. cursor
      elseif cut == #cursor then  -- a root checkpoint's timeline member: ids below it
        root_upper = '(\0' .. string.sub(cursor, 1, cut - 1)
      else  -- a subgraph checkpoint's: its id too (the root sorts last among equal ids)
        root_upper = '[\0' .. string.sub(cursor, 1, cut - 1)
      end
    end
    for _, m in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[K_CPS], root_upper, '[\0', 'LIMIT', 0, limit)) do
      root[#root + 1] = {string.sub(m, 2) .. '\0', m}
    end
    for _, t in ipairs(redis.call('ZREVRANGEBYLEX', KEYS[K_SUB], sub_upper, '-', 'LIMIT', 0, limit)) do
      subs[#subs + 1] = {t, member_of(t)}
    end
  else
    if sub_ok then lacking[#lacking + 1] = 'sub' end
    for _, m in ipairs(redis.call('ZRANGE', KEYS[K_CPS], 0, -1)) do
      local t = timeline_of(m) or (string.sub(m, 2) .. '\0')
      if cursor == '' or before(t, cursor) then subs[#subs + 1] = {t, m} end
    end
    table.sort(subs, function(a, b) return before(b[1], a[1]) end)
  end
  -- merge two descending lists, keep the first `limit`
  local i, j = 1, 1
  while #members < limit and (i <= #root or j <= #subs) do
    local pick
    if j > #subs or (i <= #root and before(subs[j][1], root[i][1])) then
      pick = root[i]; i = i + 1
    else
      pick = subs[j]; j = j + 1
    end
    members[#members + 1] = pick[2]
    timelines[pick[2]] = pick[1]
  end
end

if ARGV[1] == 'range' then
  if cps_ok then
    members = redis.call('ZREVRANGEBYLEX', KEYS[K_CPS], ARGV[2], ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
  end
elseif ARGV[1] == 'all' then
  if cps_ok then newest_of_all(ARGV[2], tonumber(ARGV[3])) end
else
  for i = 2, #ARGV do members[#members + 1] = ARGV[i] end
end
local CHUNK = 1000
local out = {wrongtype, lacking}
for _, member in ipairs(members) do
  local writes = {}
  local wms = writes_ok and writes_of(member) or {}
  -- HMGET in chunks: unpack() fails past ~8,000 values (LUAI_MAXCSTACK), and a crashed
  -- Send fan-out leaves a checkpoint with as many pending writes as it had tasks.
  for first = 1, #wms, CHUNK do
    local last = math.min(first + CHUNK - 1, #wms)
    local values = redis.call('HMGET', KEYS[K_WR], unpack(wms, first, last))
    for j = first, last do
      writes[#writes + 1] = wms[j]
      writes[#writes + 1] = values[j - first + 1]
    end
  end
  local record = cp_ok and redis.call('HGET', KEYS[K_CP], member)
  -- 1: the index holds a member whose record is gone (the reader drops it from the index)
  local lost = 0
  if cp_ok and cps_ok and not record then
    if ARGV[1] ~= 'members' or redis.call('ZSCORE', KEYS[K_CPS], member) then lost = 1 end
  end
  out[#out + 1] = {member, record or false, writes, lost, timelines[member]}
end
return out
