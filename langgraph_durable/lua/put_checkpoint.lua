-- Store one checkpoint and its new channel values atomically.
-- KEYS: the thread's keys, then their damaged twins (see _prelude.lua)
-- ARGV: 1 ttl, 2 checkpoint member, 3 checkpoint record, 4 run id,
--       5 min and 6 max ZLEXCOUNT bounds of the checkpoint's namespace,
--       7.. pairs of (blob field, blob record) for the channels that changed
-- Returns the number of checkpoints the namespace now has (for keep_last retention).
repair()
redis.call('HSET', KEYS[K_CP], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[K_CPS], 0, ARGV[2])
redis.call('HSET', KEYS[K_RUNS], ARGV[2], ARGV[4])
for i = 7, #ARGV, 2 do
  redis.call('HSET', KEYS[K_BL], ARGV[i], ARGV[i + 1])
end
touch(ARGV[1])
return redis.call('ZLEXCOUNT', KEYS[K_CPS], ARGV[5], ARGV[6])
