-- Store one checkpoint atomically, once its new channel values are in place.
-- KEYS: ThreadKeys.for_writes, or with_twins after an LGD_REPAIR reply (see _prelude.lua)
-- ARGV: 1 ttl, 2 fencing token or "", 3 checkpoint member, 4 checkpoint record, 5 run id
--       or "", 6 min and 7 max ZLEXCOUNT bounds of the checkpoint's namespace (both ""
--       without keep_last: nothing to count), then
--       8 "sent": 9.. the blob fields of the channels that changed, already written by
--                 HSETNX in the same pipeline (big values cost Redis about as much
--                 again when they pass through Lua, so the usual path keeps them out)
--       8 "inline": 9.. pairs of (blob field, blob record)
-- Returns the number of checkpoints the namespace now has (for keep_last retention; 0
-- without bounds), or -1 when a "sent" value is not there (the value hash has the wrong
-- type): the caller then sends the values inline, with the twins, and this script
-- repairs the hash first.
local denied = fence_denial(ARGV[2])
if denied then return redis.error_reply(denied) end
if ARGV[8] == 'sent' then
  for i = 9, #ARGV do
    local ok, present = pcall(redis.call, 'HEXISTS', KEYS[K_BL], ARGV[i])
    if not ok or present == 0 then return -1 end
  end
else
  repair()
  for i = 9, #ARGV, 2 do
    redis.call('HSET', KEYS[K_BL], ARGV[i], ARGV[i + 1])
  end
end
local function index()
  redis.call('HSET', KEYS[K_CP], ARGV[3], ARGV[4])
  if ARGV[5] ~= '' then redis.call('HSET', KEYS[K_RUNS], ARGV[3], ARGV[5]) end
  redis.call('ZADD', KEYS[K_CPS], 0, ARGV[3])
end
if not repairing(index) then return redis.error_reply('LGD_REPAIR') end
touch(ARGV[1])
if ARGV[6] == '' then return 0 end
return redis.call('ZLEXCOUNT', KEYS[K_CPS], ARGV[6], ARGV[7])
