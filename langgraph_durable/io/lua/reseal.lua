-- Replace records in place (resign: a newer signing key, the newest format), each only
-- if it still holds the bytes it was read with: a concurrent write, retention or
-- quarantine wins, and the next resign picks the record up again.
-- KEYS: the thread's keys (see _prelude.lua)
-- ARGV: quadruples (hash: "cp" | "wr" | "bl" | "lg" | "head", field, old record or ""
--       for none, new record)
-- Returns the number of records replaced.
local hashes = {cp = K_CP, wr = K_WR, bl = K_BL, lg = K_LG, head = K_HEAD}
local replaced = 0
for i = 1, #ARGV, 4 do
  local key = KEYS[hashes[ARGV[i]]]
  local ok, current = pcall(redis.call, 'HGET', key, ARGV[i + 1])
  if ok and (current or '') == ARGV[i + 2] then
    redis.call('HSET', key, ARGV[i + 1], ARGV[i + 3])
    replaced = replaced + 1
  end
end
return replaced
