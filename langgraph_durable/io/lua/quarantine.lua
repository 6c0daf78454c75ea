-- Move damaged records out of the read path, keeping their bytes for forensics.
-- A checkpoint or write member also leaves its index, so reads fall back past it; one
-- whose record is gone leaves it too, unless it already left (deleted by retention since
-- the read that found it: that is no damage). A checkpoint also leaves the timeline of
-- the subgraph namespaces (a stale timeline member, whose checkpoint is gone, leaves it).
-- KEYS: ThreadKeys.with_twins (see _prelude.lua)
-- ARGV: 1 ttl (seconds or 0), then quadruples of (hash kind: "cp" | "wr" | "bl" | "el", field,
--       quarantine field, reason)
-- Returns the number of records moved.
repair(ARGV[1])
local hashes = {cp = K_CP, wr = K_WR, bl = K_BL, el = K_EL}
local indexes = {cp = K_CPS, wr = K_WIX}
local moved = 0
for i = 2, #ARGV, 4 do
  local kind, field = ARGV[i], ARGV[i + 1]
  local record = redis.call('HGET', KEYS[hashes[kind]], field)
  local index = indexes[kind]
  local timeline = kind == 'cp' and timeline_of(field)
  local untimed = timeline and redis.call('ZREM', KEYS[K_SUB], timeline) == 1
  if record or untimed or (index and redis.call('ZSCORE', KEYS[index], field)) then
    redis.call('HSET', KEYS[K_QT], ARGV[i + 2], cmsgpack.pack({ARGV[i + 3], record or false}))
    redis.call('HDEL', KEYS[hashes[kind]], field)
    if index then redis.call('ZREM', KEYS[index], field) end
    moved = moved + 1
  end
end
local ttl = tonumber(ARGV[1]) or 0
if moved > 0 and ttl > 0 then redis.call('EXPIRE', KEYS[K_QT], ttl) end
return moved
