-- Read tool-call ledger entries: one task's (a ZRANGEBYLEX range of the index) or all.
-- Either half of an entry (its index member, its record) is enough to know the call
-- started: when the index and the hash differ in size (one was evicted, a bad restore),
-- the hash's fields in range are read as well, and those the index lacks are returned too.
-- KEYS: ThreadKeys.with_twins (see _prelude.lua); read only
-- ARGV: 1 min, 2 max (ZRANGEBYLEX bounds), 3 "fields" to skip the records, or "",
--       4 the prefix every field within the bounds starts with ("" for all),
--       5 (one task's read) the checkpoint member prefix of the namespace the task
--       started in, 6 and 7 the bounds of the rolled-back-run fields
-- Returns { {keys of the wrong type...}, damaged (1 if a ledger key was ever moved
-- aside as damaged, so entries may be missing), {field, record or false, ...},
-- {fields of records the index lacks}, {starting checkpoints still saved},
-- {rolled-back-run field, record, ...}, {field, signed mark, ...} for the entries read
-- that have one (heads.py) } (with "fields": {field, ...} for the third; the fifth and
-- sixth empty without ARGV 5, the marks also for a whole-ledger read)
local index_ok = usable(K_LGX, 'zset')
local hash_ok = usable(K_LG, 'hash')
local damaged = 0
if redis.call('EXISTS', KEYS[TWIN + K_LG], KEYS[TWIN + K_LGX]) > 0 then damaged = 1 end
if not (index_ok and hash_ok) then return {wrongtype, 1, {}, {}, {}, {}, {}} end
local fields = redis.call('ZRANGEBYLEX', KEYS[K_LGX], ARGV[1], ARGV[2])
local unindexed = {}
if redis.call('ZCARD', KEYS[K_LGX]) ~= redis.call('HLEN', KEYS[K_LG]) then
  local prefix = ARGV[4] or ''
  for _, field in ipairs(redis.call('HKEYS', KEYS[K_LG])) do
    if string.sub(field, 1, #prefix) == prefix and not redis.call('ZSCORE', KEYS[K_LGX], field) then
      unindexed[#unindexed + 1] = field
      fields[#fields + 1] = field
    end
  end
end
if ARGV[3] == 'fields' then return {wrongtype, damaged, fields, unindexed, {}, {}, {}} end
local out = {}
for i = 1, #fields do  -- HGET each: unpack() of a long thread's fields would overflow
  out[#out + 1] = fields[i]
  out[#out + 1] = redis.call('HGET', KEYS[K_LG], fields[i])
end
-- Executions (ledger/executions.py): the field part after the task's prefix names the
-- execution, whose part before any "." is the checkpoint it started from.
local saved, voids = {}, {}
if (ARGV[5] or '') ~= '' then
  if usable(K_CPS, 'zset') then
    local seen = {}
    for i = 1, #fields do
      local execution = string.match(string.sub(fields[i], #ARGV[4] + 1), '^([^%z]*)%z')
      if execution and not seen[execution] then
        seen[execution] = true
        local start = string.match(execution, '^[^%.]*')
        if start ~= '' and redis.call('ZSCORE', KEYS[K_CPS], ARGV[5] .. start) then
          saved[#saved + 1] = start
        end
      end
    end
  end
  for _, field in ipairs(redis.call('ZRANGEBYLEX', KEYS[K_LGX], ARGV[6], ARGV[7])) do
    voids[#voids + 1] = field
    voids[#voids + 1] = redis.call('HGET', KEYS[K_LG], field)
  end
end
local marks = {}
if redis.call('EXISTS', KEYS[K_HEAD]) == 1 and usable(K_HEAD, 'hash') then
  for i = 1, #fields do
    local mark = redis.call('HGET', KEYS[K_HEAD], '\1\3lg\0' .. fields[i])
    if mark then
      marks[#marks + 1] = fields[i]
      marks[#marks + 1] = mark
    end
  end
end
return {wrongtype, damaged, out, unindexed, saved, voids, marks}
