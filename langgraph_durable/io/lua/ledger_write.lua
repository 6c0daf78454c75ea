-- Write tool-call ledger entries (an intent, a result, an escalation) atomically.
-- A record being replaced that was found damaged is kept in the quarantine hash first.
-- A write made from what a read found names it: each such field's record must still be
-- the one read (its SHA-1), or still absent, or already the one this write stores (the
-- same write sent again after a lost reply), else nothing is written and the field is
-- returned (the read came from a server that had not seen the latest write, a demoted
-- primary, or another worker wrote since: store.py reads again).
-- KEYS: ThreadKeys.with_twins (see _prelude.lua)
-- ARGV: 1 ttl, 2 fencing token or "", 3 the number R of runs the entries belong to, then
--       R pairs (runs member, run id: keys.ledger_run_member), then the number E of
--       expectations and E triples (field, SHA-1 of the record read or "" for none,
--       SHA-1 of the record written), then
--       sextuples (field,
--       record, quarantine field, reason, mark field, mark; quarantine field and reason
--       empty unless the record being replaced is damaged, the mark's two empty
--       unsigned: heads.py). An empty record re-indexes the field's record, if it is
--       still there (ledger_read found it missing from the index).
local denied = fence_denial(ARGV[2])
if denied then return redis.error_reply(denied) end
repair(ARGV[1])
local expectations = 5 + 2 * tonumber(ARGV[3])
local first = expectations + 3 * tonumber(ARGV[expectations - 1])
for i = expectations, first - 1, 3 do
  local current = redis.call('HGET', KEYS[K_LG], ARGV[i])
  local changed = ARGV[i + 1] ~= ''
  if current then
    local seen = redis.sha1hex(current)
    changed = seen ~= ARGV[i + 1] and seen ~= ARGV[i + 2]
  end
  if changed then
    local readonly = not_writable()  -- a replica's older state: not a change
    if readonly then return redis.error_reply(readonly) end
    return ARGV[i]
  end
end
for i = 4, expectations - 2, 2 do
  redis.call('HSET', KEYS[K_RUNS], ARGV[i], ARGV[i + 1])
end
for i = first, #ARGV, 6 do
  local field = ARGV[i]
  if ARGV[i + 1] == '' then
    if redis.call('HEXISTS', KEYS[K_LG], field) == 1 then
      redis.call('ZADD', KEYS[K_LGX], '0', field)
    end
  else
    if ARGV[i + 3] ~= '' then
      local old = redis.call('HGET', KEYS[K_LG], field)
      if old then
        redis.call('HSET', KEYS[K_QT], ARGV[i + 2], cmsgpack.pack({ARGV[i + 3], old}))
      end
    end
    redis.call('HSET', KEYS[K_LG], field, ARGV[i + 1])
    redis.call('ZADD', KEYS[K_LGX], '0', field)
    if ARGV[i + 4] ~= '' then redis.call('HSET', KEYS[K_HEAD], ARGV[i + 4], ARGV[i + 5]) end
  end
end
touch(ARGV[1])
return 1
