-- Store the pending writes of one task atomically. Regular writes are first-write-wins
-- per (task, idx); writes to the special channels (error, interrupt, resume, scheduled)
-- overwrite, as in LangGraph's InMemorySaver.
-- KEYS: ThreadKeys.for_writes (with a ttl), the compact layout (without one: core/layouts.py),
-- or with_twins after an LGD_REPAIR reply (see _prelude.lua)
-- ARGV: 1 ttl, or "persist" (an interrupt: the thread's keys lose their expiry until
--       its next checkpoint write sets it again; see touch), 2 fencing token or "",
--       3 the number E of elements, then E pairs (digest, element) that the writes'
--       manifests name (elements.py; written over what is stored: these bytes hash to
--       their digest, what is stored may be damaged), then triples of (write member,
--       write record, "1" to overwrite | "0")
local denied = fence_denial(ARGV[2])
if denied then return redis.error_reply(denied) end
local first = 4 + 2 * ARGV[3]
local repaired = repairing(function()
  next_generation()  -- a retention deletion planned before these is void
  in_pairs_call('HSET', KEYS[K_EL], ARGV, 4, first - 1)  -- right by their digests: heals
  local members = {}
  for i = first, #ARGV, 3 do
    if ARGV[i + 2] == '1' then
      redis.call('HSET', KEYS[K_WR], ARGV[i], ARGV[i + 1])
    else
      redis.call('HSETNX', KEYS[K_WR], ARGV[i], ARGV[i + 1])
    end
    members[#members + 1] = '0'
    members[#members + 1] = ARGV[i]
  end
  -- Indexed (in one ZADD) even when HSETNX kept an earlier record: a no-op then, unless
  -- an earlier attempt stored the record and failed before indexing it.
  in_pairs_call('ZADD', KEYS[K_WIX], members, 1, #members)
end, ARGV[1])
if not repaired then return redis.error_reply('LGD_REPAIR') end
if ARGV[1] == 'persist' then persist() else touch(ARGV[1]) end
return 1
