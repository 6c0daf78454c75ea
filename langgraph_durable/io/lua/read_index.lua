-- Every checkpoint member of a thread, oldest first (for listings across namespaces).
-- KEYS: the thread's keys (see _prelude.lua)
-- Returns: { {keys of the wrong type...}, {member, ...}, {index keys lacking records} }
local lacking, cps_ok = unindexed()
if not cps_ok then return {wrongtype, {}, {}} end
return {wrongtype, redis.call('ZRANGE', KEYS[K_CPS], 0, -1), lacking}
