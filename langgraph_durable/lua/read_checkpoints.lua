-- Read checkpoints with their pending writes in one call.
-- KEYS: the thread's keys (see _prelude.lua)
-- ARGV: 1 "range": 2 max bound, 3 min bound, 4 limit  (newest first, ZREVRANGEBYLEX)
--       1 "members": 2.. checkpoint members
-- Returns: { {keys of the wrong type...}, {index keys lacking records (see unindexed)},
--            {member, record or nil, {write member, write
--            record, ...}, 1 if the member is indexed but its record is gone else 0}, ... }
local cps_ok, cp_ok = usable(K_CPS, 'zset'), usable(K_CP, 'hash')
local writes_ok = usable(K_WIX, 'zset') and usable(K_WR, 'hash')
local members = {}
if ARGV[1] == 'range' then
  if cps_ok then
    members = redis.call('ZREVRANGEBYLEX', KEYS[K_CPS], ARGV[2], ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
  end
else
  for i = 2, #ARGV do members[#members + 1] = ARGV[i] end
end
local CHUNK = 1000
local out = {wrongtype, unindexed()}
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
    if ARGV[1] == 'range' or redis.call('ZSCORE', KEYS[K_CPS], member) then lost = 1 end
  end
  out[#out + 1] = {member, record or false, writes, lost}
end
return out
