-- Forget tool-ledger entries no checkpoint can replay any more (retention).
-- KEYS: ThreadKeys.with_twins (see _prelude.lua)
-- ARGV: ledger fields
repair()
for i = 1, #ARGV do
  redis.call('HDEL', KEYS[K_LG], ARGV[i])
  redis.call('ZREM', KEYS[K_LGX], ARGV[i])
end
return #ARGV
