-- Delete checkpoints (with their writes and run entries) and channel values.
-- Guarded: when ARGV[2] is not "", nothing happens unless the checkpoint index still has
-- ARGV[2] members and its newest is ARGV[3], i.e. no checkpoint was written since the
-- caller planned this deletion (a new checkpoint could reference a value planned away).
-- KEYS: ThreadKeys.with_twins (see _prelude.lua)
-- ARGV: 1 ttl (for the twins), 2 guard count or "", 3 guard newest member, 4 number N
--       of checkpoint members, 5 .. 4+N checkpoint members, 5+N number B of blob fields,
--       6+N .. 5+N+B blob fields, the rest: element digests (elements.py)
-- Returns the number of checkpoints deleted, or -1 when the guard failed.
repair(ARGV[1])
if ARGV[2] ~= '' then
  local newest = redis.call('ZREVRANGE', KEYS[K_CPS], 0, 0)[1] or ''
  if redis.call('ZCARD', KEYS[K_CPS]) ~= tonumber(ARGV[2]) or newest ~= ARGV[3] then
    return -1
  end
end
local n = tonumber(ARGV[4])
local deleted = 0
for i = 5, 4 + n do
  local member = ARGV[i]
  local wms = writes_of(member)
  for _, wm in ipairs(wms) do
    redis.call('HDEL', KEYS[K_WR], wm)
    redis.call('ZREM', KEYS[K_WIX], wm)
  end
  deleted = deleted + redis.call('ZREM', KEYS[K_CPS], member)
  local timeline = timeline_of(member)
  if timeline then redis.call('ZREM', KEYS[K_SUB], timeline) end
  redis.call('HDEL', KEYS[K_CP], member)
  redis.call('HDEL', KEYS[K_RUNS], member)
end
local b = tonumber(ARGV[5 + n])
for i = 6 + n, 5 + n + b do
  redis.call('HDEL', KEYS[K_BL], ARGV[i])
end
for i = 6 + n + b, #ARGV do
  redis.call('HDEL', KEYS[K_EL], ARGV[i])
end
return deleted
