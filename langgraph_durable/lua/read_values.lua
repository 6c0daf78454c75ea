-- Read channel values (HMGET) of a thread, tolerating a value hash of the wrong type.
-- KEYS: the thread's keys (see _prelude.lua)
-- ARGV: blob fields
-- Returns: { {keys of the wrong type...}, {record or nil, ...} }
if not usable(K_BL, 'hash') then return {wrongtype, {}} end
return {wrongtype, redis.call('HMGET', KEYS[K_BL], unpack(ARGV))}
