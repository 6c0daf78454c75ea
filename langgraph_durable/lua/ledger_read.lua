-- Read tool-call ledger entries: one task's (a ZRANGEBYLEX range of the index) or all.
-- KEYS: ThreadKeys.with_twins (see _prelude.lua); read only
-- ARGV: 1 min, 2 max (ZRANGEBYLEX bounds), 3 optional "fields" to skip the records
-- Returns { {keys of the wrong type...}, damaged (1 if a ledger key was ever moved
-- aside as damaged, so entries may be missing), {field, record or false, ...} }
-- (with "fields": just {field, ...})
local index_ok = usable(K_LGX, 'zset')
local hash_ok = usable(K_LG, 'hash')
local damaged = 0
if redis.call('EXISTS', KEYS[TWIN + K_LG], KEYS[TWIN + K_LGX]) > 0 then damaged = 1 end
if not (index_ok and hash_ok) then return {wrongtype, 1, {}} end
local fields = redis.call('ZRANGEBYLEX', KEYS[K_LGX], ARGV[1], ARGV[2])
if ARGV[3] == 'fields' then return {wrongtype, damaged, fields} end
local out = {}
for i = 1, #fields do  -- HGET each: unpack() of a long thread's fields would overflow
  out[#out + 1] = fields[i]
  out[#out + 1] = redis.call('HGET', KEYS[K_LG], fields[i])
end
return {wrongtype, damaged, out}
