-- Store one checkpoint and its new channel values atomically.
-- KEYS: the thread's keys, then their damaged twins (see _prelude.lua)
-- ARGV: 1 ttl, 2 fencing token or "", 3 checkpoint member, 4 checkpoint record, 5 run id,
--       6 min and 7 max ZLEXCOUNT bounds of the checkpoint's namespace,
--       8.. pairs of (blob field, blob record) for the channels that changed
-- Returns the number of checkpoints the namespace now has (for keep_last retention).
local denied = fence_denial(ARGV[2])
if denied then return redis.error_reply(denied) end
repair()
redis.call('HSET', KEYS[K_CP], ARGV[3], ARGV[4])
redis.call('ZADD', KEYS[K_CPS], 0, ARGV[3])
redis.call('HSET', KEYS[K_RUNS], ARGV[3], ARGV[5])
for i = 8, #ARGV, 2 do
  redis.call('HSET', KEYS[K_BL], ARGV[i], ARGV[i + 1])
end
touch(ARGV[1])
return redis.call('ZLEXCOUNT', KEYS[K_CPS], ARGV[6], ARGV[7])
