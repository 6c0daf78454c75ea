-- Delete checkpoints (with their writes and run entries) and channel values.
-- Guarded: nothing happens unless the thread's write generation is still ARGV[2] (""
-- when it had none), i.e. no checkpoint, pending write or copy was written since the
-- caller planned this deletion (it could name a value or an element planned away).
-- KEYS: ThreadKeys.with_twins (see _prelude.lua)
-- ARGV: 1 ttl (for the twins), 2 the generation it was planned at, 3 number N of
--       checkpoint members, 4 .. 3+N checkpoint members, 4+N number B of blob fields,
--       5+N .. 4+N+B blob fields, 5+N+B number H of head updates, then H pairs (head
--       field, signed head naming the newest checkpoint left, or "" for none: heads.py),
--       the rest: element digests (elements.py)
-- Returns the number of checkpoints deleted, or -1 when the guard failed.
repair(ARGV[1])
if (redis.call('GET', KEYS[K_GEN]) or '') ~= ARGV[2] then return -1 end
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
  local timeline = timeline_of(member)
  if timeline then redis.call('ZREM', KEYS[K_SUB], timeline) end
  redis.call('HDEL', KEYS[K_CP], member)
  redis.call('HDEL', KEYS[K_RUNS], member)
end
local b = tonumber(ARGV[4 + n])
for i = 5 + n, 4 + n + b do
  redis.call('HDEL', KEYS[K_BL], ARGV[i])
end
local h = tonumber(ARGV[5 + n + b])
for i = 6 + n + b, 5 + n + b + 2 * h, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[K_HEAD], ARGV[i])
  else
    redis.call('HSET', KEYS[K_HEAD], ARGV[i], ARGV[i + 1])
  end
end
for i = 6 + n + b + 2 * h, #ARGV do
  redis.call('HDEL', KEYS[K_EL], ARGV[i])
end
-- Nothing left of the thread: its generation and heads go too (a later write starts
-- them afresh).
if redis.call('EXISTS', unpack(KEYS, 1, K_GEN - 1)) == 0 then
  redis.call('DEL', KEYS[K_GEN], KEYS[K_HEAD])
end
return deleted
