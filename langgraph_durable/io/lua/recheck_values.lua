-- After a read found channel values missing: were they missing while their checkpoint
-- was still indexed (damage), or did a concurrent deletion (retention, delete_thread)
-- remove both? Reads send the index read and the value read in one pipeline without
-- MULTI (Redis refuses MULTI when out of memory), so only an atomic look tells.
-- KEYS: the thread's keys (see _prelude.lua); read only
-- ARGV: 1 number N of checkpoint members, 2 .. N+1 the members, then blob fields
-- Returns { {1 or 0 per member: its record still stored}, {value or false per field} }
-- (retention and delete_thread remove a checkpoint's record together with its values)
local n = tonumber(ARGV[1])
local indexed = {}
for i = 2, n + 1 do
  local ok, stored = pcall(redis.call, 'HEXISTS', KEYS[K_CP], ARGV[i])
  indexed[#indexed + 1] = (ok and stored == 1) and 1 or 0
end
local values = {}
for i = n + 2, #ARGV do
  local ok, value = pcall(redis.call, 'HGET', KEYS[K_BL], ARGV[i])
  values[#values + 1] = (ok and value) or false
end
return {indexed, values}
