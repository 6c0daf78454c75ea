-- Mark model answers settled (ledger/journal.py), each only if its record is still the
-- one the writer last saw: a settle is made from a copy kept in memory, and must never
-- write over a newer record (an operator's drop, another worker's replay count).
-- KEYS: ThreadKeys.with_twins (see _prelude.lua)
-- ARGV: 1 ttl, 2 fencing token or "", then quintuples (field, SHA-1 of the record the
--       writer last saw, the settled record, its mark field and mark: heads.py, or "")
-- Returns how many were written.
local denied = fence_denial(ARGV[2])
if denied then return redis.error_reply(denied) end
if not (usable(K_LG, 'hash') and usable(K_LGX, 'zset')) then return 0 end
local written = 0
for i = 3, #ARGV, 5 do
  local current = redis.call('HGET', KEYS[K_LG], ARGV[i])
  if current and redis.sha1hex(current) == ARGV[i + 1] then
    redis.call('HSET', KEYS[K_LG], ARGV[i], ARGV[i + 2])
    if ARGV[i + 3] ~= '' then redis.call('HSET', KEYS[K_HEAD], ARGV[i + 3], ARGV[i + 4]) end
    written = written + 1
  end
end
if written > 0 then touch(ARGV[1]) end
return written
