-- Rebuild the checkpoint and write indexes from their hashes: put back the member of
-- every record the index lacks (the index key was evicted, expired apart from the rest
-- of the thread, or lost in a bad restore). A hash field is exactly its index member
-- (keys.py), so nothing is guessed; records themselves are verified when read.
-- KEYS: ThreadKeys.with_twins (see _prelude.lua)
-- ARGV: 1 ttl (seconds or 0)
-- Returns the number of members put back.
repair(ARGV[1])
local added = 0
for _, pair in ipairs({{K_CP, K_CPS}, {K_WR, K_WIX}}) do
  if redis.call('HLEN', KEYS[pair[1]]) > redis.call('ZCARD', KEYS[pair[2]]) then
    for _, field in ipairs(redis.call('HKEYS', KEYS[pair[1]])) do
      added = added + redis.call('ZADD', KEYS[pair[2]], 'NX', 0, field)
    end
  end
end
touch(ARGV[1])
return added
