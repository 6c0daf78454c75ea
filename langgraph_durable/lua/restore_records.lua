-- Write verified, re-sealed records into a thread in one call (copy_thread).
-- KEYS: ThreadKeys.with_twins of the target thread (see _prelude.lua)
-- ARGV: 1 ttl, 2 number C of checkpoints, 3 number W of writes, 4 number L of ledger
--       entries, 5 number B of channel values, then C triples (checkpoint member,
--       record, run id), then W pairs (write member, record), then L pairs (ledger
--       field, record), then B pairs (blob field, record), then pairs (element digest,
--       element)
repair(ARGV[1])
next_generation()
local c, w, l, b = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local i = 6
for _ = 1, c do
  redis.call('HSET', KEYS[K_CP], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[K_CPS], 0, ARGV[i])
  local timeline = timeline_of(ARGV[i])
  if timeline then redis.call('ZADD', KEYS[K_SUB], 0, timeline) end
  if ARGV[i + 2] ~= '' then redis.call('HSET', KEYS[K_RUNS], ARGV[i], ARGV[i + 2]) end
  i = i + 3
end
for _ = 1, w do
  redis.call('HSET', KEYS[K_WR], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[K_WIX], 0, ARGV[i])
  i = i + 2
end
for _ = 1, l do
  redis.call('HSET', KEYS[K_LG], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[K_LGX], 0, ARGV[i])
  i = i + 2
end
for _ = 1, b do
  redis.call('HSET', KEYS[K_BL], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i <= #ARGV do
  redis.call('HSET', KEYS[K_EL], ARGV[i], ARGV[i + 1])
  i = i + 2
end
touch(ARGV[1])
return c
