-- Read tool-call ledger entries: one task's (a ZRANGEBYLEX range of the index) or all.
-- KEYS: the thread's keys, then their damaged twins (see _prelude.lua); read only
-- ARGV: 1 min, 2 max (ZRANGEBYLEX bounds)
-- Returns { {keys of the wrong type...}, damaged (1 if a ledger key was ever moved
-- aside as damaged, so entries may be missing), {field, record or false, ...} }
local n = #KEY_TYPES
local index_ok = usable(K_LGX, 'zset')
local hash_ok = usable(K_LG, 'hash')
local damaged = 0
if redis.call('EXISTS', KEYS[K_LG + n], KEYS[K_LGX + n]) > 0 then damaged = 1 end
if not (index_ok and hash_ok) then return {wrongtype, 1, {}} end
local fields = redis.call('ZRANGEBYLEX', KEYS[K_LGX], ARGV[1], ARGV[2])
local out = {}
if #fields > 0 then
  local records = redis.call('HMGET', KEYS[K_LG], unpack(fields))
  for i = 1, #fields do
    out[#out + 1] = fields[i]
    out[#out + 1] = records[i]
  end
end
return {wrongtype, damaged, out}
