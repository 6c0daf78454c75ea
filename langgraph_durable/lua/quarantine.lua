-- Move damaged records out of the read path, keeping their bytes for forensics.
-- A checkpoint or write member also leaves its index, so reads fall back past it.
-- KEYS: ThreadKeys.with_twins (see _prelude.lua)
-- ARGV: quadruples of (hash kind: "cp" | "wr" | "bl", field, quarantine field, reason)
-- Returns the number of records moved.
repair()
local hashes = {cp = K_CP, wr = K_WR, bl = K_BL}
local indexes = {cp = K_CPS, wr = K_WIX}
local moved = 0
for i = 1, #ARGV, 4 do
  local kind, field = ARGV[i], ARGV[i + 1]
  local record = redis.call('HGET', KEYS[hashes[kind]], field)
  redis.call('HSET', KEYS[K_QT], ARGV[i + 2], cmsgpack.pack({ARGV[i + 3], record or false}))
  redis.call('HDEL', KEYS[hashes[kind]], field)
  if indexes[kind] then redis.call('ZREM', KEYS[indexes[kind]], field) end
  moved = moved + 1
end
return moved
