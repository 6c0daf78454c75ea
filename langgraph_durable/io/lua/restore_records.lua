-- Write verified, re-sealed records into a thread in one call (copy_thread).
-- KEYS: ThreadKeys.with_twins of the target thread (see _prelude.lua)
-- ARGV: 1 ttl, or "persist" (the source waits on an interrupt(): no expiry, see arm),
--       2 number R of ledger runs, then R pairs (runs member, run id), then the number H
--       of heads, then H pairs (head field, signed head: heads.py), then the number
--       C of checkpoints, number W of writes, number L of ledger entries, number B of
--       channel values, then C triples (checkpoint member, record, run id), then W pairs
--       (write member, record), then L pairs (ledger field, record), then B pairs (blob
--       field, record), then pairs (element digest, element)
repair(ARGV[1])
next_generation()
local r = tonumber(ARGV[2])
for j = 3, 2 + 2 * r, 2 do redis.call('HSET', KEYS[K_RUNS], ARGV[j], ARGV[j + 1]) end
local h = tonumber(ARGV[3 + 2 * r])
for j = 4 + 2 * r, 3 + 2 * r + 2 * h, 2 do redis.call('HSET', KEYS[K_HEAD], ARGV[j], ARGV[j + 1]) end
local at = 4 + 2 * r + 2 * h
local c, w, l, b = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
local i = at + 4
for _ = 1, c do
  redis.call('HSET', KEYS[K_CP], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[K_CPS], 0, ARGV[i])
  local timeline = timeline_of(ARGV[i])
  if timeline then redis.call('ZADD', KEYS[K_SUB], 0, timeline) end
  if ARGV[i + 2] ~= '' then redis.call('HSET', KEYS[K_RUNS], ARGV[i], ARGV[i + 2]) end
  i = i + 3
end
for _ = 1, w do
  redis.call('HSET', KEYS[K_WR], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[K_WIX], 0, ARGV[i])
  i = i + 2
end
for _ = 1, l do
  redis.call('HSET', KEYS[K_LG], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[K_LGX], 0, ARGV[i])
  i = i + 2
end
for _ = 1, b do
  redis.call('HSET', KEYS[K_BL], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i <= #ARGV do
  redis.call('HSET', KEYS[K_EL], ARGV[i], ARGV[i + 1])
  i = i + 2
end
if ARGV[1] == 'persist' then persist() else arm(ARGV[1]) end
return c
