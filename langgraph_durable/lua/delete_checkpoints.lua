-- Delete checkpoints (with their writes and run entries) and channel values.
-- Guarded: when ARGV[1] is not "", nothing happens unless the checkpoint index still has
-- ARGV[1] members and its newest is ARGV[2], i.e. no checkpoint was written since the
-- caller planned this deletion (a new checkpoint could reference a value planned away).
-- KEYS: ThreadKeys.with_twins (see _prelude.lua)
-- ARGV: 1 guard count or "", 2 guard newest member, 3 number N of checkpoint members,
--       4 .. 3+N checkpoint members, the rest: blob fields
-- Returns the number of checkpoints deleted, or -1 when the guard failed.
repair()
if ARGV[1] ~= '' then
  local newest = redis.call('ZREVRANGE', KEYS[K_CPS], 0, 0)[1] or ''
  if redis.call('ZCARD', KEYS[K_CPS]) ~= tonumber(ARGV[1]) or newest ~= ARGV[2] then
    return -1
  end
end
local n = tonumber(ARGV[3])
local deleted = 0
for i = 4, 3 + n do
  local member = ARGV[i]
  local wms = writes_of(member)
  for _, wm in ipairs(wms) do
    redis.call('HDEL', KEYS[K_WR], wm)
    redis.call('ZREM', KEYS[K_WIX], wm)
  end
  deleted = deleted + redis.call('ZREM', KEYS[K_CPS], member)
  redis.call('HDEL', KEYS[K_CP], member)
  redis.call('HDEL', KEYS[K_RUNS], member)
end
for i = 4 + n, #ARGV do
  redis.call('HDEL', KEYS[K_BL], ARGV[i])
end
return deleted
