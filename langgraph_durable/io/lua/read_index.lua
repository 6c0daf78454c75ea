-- Every checkpoint member of a thread, oldest first (for listings across namespaces).
-- KEYS: the thread's keys (see _prelude.lua)
-- Returns: { {keys of the wrong type...}, {member, ...}, {index keys lacking records} }
if not usable(K_CPS, 'zset') then return {wrongtype, {}, {}} end
return {wrongtype, redis.call('ZRANGE', KEYS[K_CPS], 0, -1), unindexed()}
