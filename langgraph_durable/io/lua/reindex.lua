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
-- The timeline of the subgraph namespaces holds exactly the non-root checkpoint members:
-- rebuilt whole when its size says otherwise (written by a version without it, evicted).
local root = redis.call('ZLEXCOUNT', KEYS[K_CPS], '[\0', '(\1')
if redis.call('ZCARD', KEYS[K_SUB]) ~= redis.call('ZCARD', KEYS[K_CPS]) - root then
  redis.call('DEL', KEYS[K_SUB])
  for _, member in ipairs(redis.call('ZRANGE', KEYS[K_CPS], 0, -1)) do
    local timeline = timeline_of(member)
    if timeline then added = added + redis.call('ZADD', KEYS[K_SUB], 0, timeline) end
  end
end
touch(ARGV[1])
return added
