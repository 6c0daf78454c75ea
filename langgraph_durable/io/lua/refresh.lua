-- refresh_on_read: give the thread's keys their full ttl again, as a write does, except
-- keys without an expiry: a thread waiting on an interrupt() keeps its keys until it is
-- answered (put_writes.lua removes their expiry), and a read must not end that.
-- KEYS: the thread's keys (ThreadKeys.all; see _prelude.lua)
-- ARGV: 1 ttl (seconds)
-- Returns the number of keys refreshed.
local refreshed = 0
for i = 1, #KEYS do
  if redis.call('PTTL', KEYS[i]) > 0 then
    refreshed = refreshed + redis.call('EXPIRE', KEYS[i], ARGV[1])
  end
end
return refreshed
