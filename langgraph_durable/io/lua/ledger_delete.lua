-- Forget tool-ledger entries no checkpoint can replay any more (retention).
-- KEYS: ThreadKeys.with_twins (see _prelude.lua)
-- ARGV: 1 ttl (for the twins), then ledger fields
repair(ARGV[1])
for i = 2, #ARGV do
  redis.call('HDEL', KEYS[K_LG], ARGV[i])
  redis.call('ZREM', KEYS[K_LGX], ARGV[i])
  redis.call('HDEL', KEYS[K_HEAD], '\1\3lg\0' .. ARGV[i])  -- its mark (heads.py)
end
return #ARGV - 1
