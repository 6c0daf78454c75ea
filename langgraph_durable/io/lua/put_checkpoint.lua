-- Store one checkpoint atomically, once its new channel values are in place.
-- KEYS: ThreadKeys.for_writes (with a ttl), the compact layout (without one: core/layouts.py),
-- or with_twins after an LGD_REPAIR reply (see _prelude.lua)
-- ARGV: 1 ttl, 2 fencing token or "", 3 checkpoint member, 4 checkpoint record, 5 run id
--       or "", 6 min and 7 max ZLEXCOUNT bounds of the checkpoint's namespace (both ""
--       without keep_last: nothing to count), 8 the parent's member or "", 9 with
--       verify_elements_on_write the elements it names without sending them
--       (elements.py), else "": "s<K>:" then K times a digest and the
--       first 15 hex digits of the SHA-1 of its stored bytes, then 16-byte digests
--       (the writer never held those: only that they are there), 10
--       the number K of kept versions whose values must be there (the parent, or the
--       checkpoint it copies, stored them), 11 .. 10+K their blob fields, 11+K the
--       number U of kept versions no write stored ("never written", writes.py), 12+K
--       when they are: "renamed" (a channel renamed on load: always) or "first" (no
--       parent: only while the namespace holds no checkpoint; once it does, they must
--       be there too), 13+K .. 12+K+2U pairs (blob field, its "empty" record), 13+K+2U
--       the number E of elements sent (ahead of the script, with "sent"), then
--       14+K+2U "sent": the E element digests, the number S of blob fields sent ahead
--                 and those S fields of channels that changed, all already written
--                 by HSET / HSETNX in the same pipeline (big ones cost Redis about
--                 as much again when they pass through Lua, so the usual path keeps
--                 them out), then the number I of small elements and I pairs (digest,
--                 element), then pairs (blob field, record) of the small values, all
--                 written here (one sent ahead costs a check here that one sent in does
--                 not)
--       14+K+2U "inline": E pairs (digest, element), then pairs (blob field, record)
--       and last, the namespace's head field and signed head (heads.py), both "" unsigned
-- Returns the number of checkpoints the namespace now has (for keep_last retention; 0
-- without bounds), or -1 when a "sent" value or element is not there (a hash has the
-- wrong type): the caller then sends them inline, with the twins, and this script
-- repairs the hashes first.
-- Refuses (and changes nothing) with LGD_LEASED / LGD_FENCED (see fence_denial), or
-- LGD_LOST "checkpoint" | "value <ARGV index>" | "element" when the parent, a value it
-- passes on or an element it names is gone (flushed, lost in a restart, evicted,
-- expired): no read could use the result.
-- Counts by arithmetic on the string (half of what tonumber costs Redis's Lua).
local kept = ARGV[10] + 0
local unwritten = ARGV[11 + kept] + 0
local sent_elements = ARGV[13 + kept + 2 * unwritten] + 0
local mode = 14 + kept + 2 * unwritten
local sent = ARGV[mode] == 'sent'
local last = #ARGV - 2  -- the last two: the namespace's head field and signed head, or ""
local blobs_from, blobs_until, small_from = 0, -1, last + 1
local inline_from = 0
if sent then
  blobs_from = mode + 2 + sent_elements
  blobs_until = blobs_from + ARGV[mode + 1 + sent_elements] - 1
  inline_from = blobs_until + 2
  small_from = inline_from + 2 * ARGV[blobs_until + 1]
end

-- A refused write leaves nothing behind: the values sent ahead of this script go again,
-- unless the checkpoint is indexed already (a retried put whose first attempt went
-- through). Safe: a changed channel's version has a random tail, unique to this checkpoint.
-- Elements stay: another checkpoint may name the same one (retention collects orphans),
-- unless the thread has no checkpoint and no pending write (deleted during the run): then
-- nothing names them, and they would stay with no expiry.
local function refuse(err)
  local readonly = not_writable()  -- a replica's older state proves nothing lost
  if readonly then return redis.error_reply(readonly) end
  if sent then
    local ok, indexed = pcall(redis.call, 'ZSCORE', KEYS[K_CPS], ARGV[3])
    if not (ok and indexed) then
      for i = blobs_from, blobs_until do pcall(redis.call, 'HDEL', KEYS[K_BL], ARGV[i]) end
      if redis.call('EXISTS', KEYS[K_CPS], KEYS[K_WR]) == 0 then
        for i = mode + 1, mode + sent_elements do pcall(redis.call, 'HDEL', KEYS[K_EL], ARGV[i]) end
      end
    end
  end
  return redis.error_reply(err)
end

local denied = fence_denial(ARGV[2])
if denied then return refuse(denied) end
if ARGV[8] ~= '' then
  -- Its record, not its index entry: O(1) in the hash, where the index of a short thread
  -- is a listpack Redis scans; a record whose index entry alone was lost is reindexed by
  -- the next read, and a quarantined one leaves both. A hash of the wrong type is not a
  -- parent lost: the write below fails on it, and the resend moves it aside (repairing).
  local ok, present = pcall(redis.call, 'HEXISTS', KEYS[K_CP], ARGV[8])
  if ok and present == 0 then return refuse('LGD_LOST checkpoint') end
  for i = 11, 10 + kept do
    ok, present = pcall(redis.call, 'HEXISTS', KEYS[K_BL], ARGV[i])
    if not ok or present == 0 then return refuse('LGD_LOST value ' .. i) end
  end
end
-- No parent, in a namespace that holds checkpoints: a version kept without a value is a
-- value lost (a copy of a checkpoint whose value went missing), not one never written.
if unwritten > 0 and ARGV[12 + kept] == 'first' and ARGV[6] ~= ''
    and redis.call('ZLEXCOUNT', KEYS[K_CPS], ARGV[6], ARGV[7]) > 0 then
  for i = 13 + kept, 12 + kept + 2 * unwritten, 2 do
    local ok, present = pcall(redis.call, 'HEXISTS', KEYS[K_BL], ARGV[i])
    if not ok or present == 0 then return refuse('LGD_LOST value ' .. i) end
  end
  unwritten = 0  -- all there: nothing to record
end
-- With verify_elements_on_write, the elements the checkpoint names without sending: its
-- parent's manifests name them, so they are there unless one was lost (the hash evicted,
-- a field deleted, a damaged one a reader quarantined) or changed in place. The writer
-- then sends them all (writes.py), so what it acknowledges reads back. Those it knows
-- by their bytes are checked by SHA-1 over them (Redis's Lua has nothing cheaper that a
-- changed byte cannot slip by), the others by HSTRLEN (0 for a missing field; a stored
-- element never is). Checked by length (the default), they are read in the put's round
-- trip ahead of this script instead (element_window.py): cheaper outside Lua.
local named = ARGV[9]
if named ~= '' then
  local known, at = string.match(named, '^s(%d+):()')
  local known_until = at + 31 * tonumber(known)
  local j = at
  while j <= #named do
    local field = string.sub(named, j, j + 15)
    if j < known_until then
      local ok, stored = pcall(redis.call, 'HGET', KEYS[K_EL], field)
      if ok and not stored then return refuse('LGD_LOST element missing') end
      if ok and string.sub(redis.sha1hex(stored), 1, 15) ~= string.sub(named, j + 16, j + 30) then
        return refuse('LGD_LOST element damaged')
      end
      j = j + 31
    else
      local ok, length = pcall(redis.call, 'HSTRLEN', KEYS[K_EL], field)
      if ok and length == 0 then return refuse('LGD_LOST element missing') end
      j = j + 16
    end
  end
end
if sent then
  for i = mode + 1, mode + sent_elements do
    local ok, present = pcall(redis.call, 'HEXISTS', KEYS[K_EL], ARGV[i])
    if not ok or present == 0 then return -1 end
  end
  for i = blobs_from, blobs_until do
    local ok, present = pcall(redis.call, 'HEXISTS', KEYS[K_BL], ARGV[i])
    if not ok or present == 0 then return -1 end
  end
  if not (pcall(in_pairs_call, 'HSET', KEYS[K_EL], ARGV, inline_from, small_from - 1)
      and pcall(in_pairs_call, 'HSET', KEYS[K_BL], ARGV, small_from, last)) then
    return -1  -- a hash has the wrong type: sent again inline, which repairs it first
  end
else
  repair(ARGV[1])
  local i = mode + 1
  for _ = 1, sent_elements do
    redis.call('HSET', KEYS[K_EL], ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  for j = i, last, 2 do
    redis.call('HSET', KEYS[K_BL], ARGV[j], ARGV[j + 1])
  end
end
-- Versions kept that no write stored: an "empty" record says so (read as no value, as
-- InMemorySaver reads a version it holds nothing for), so a later read tells them from a
-- value that was stored and then lost. A value stored under one stays.
for i = 13 + kept, 12 + kept + 2 * unwritten, 2 do
  if not pcall(redis.call, 'HSETNX', KEYS[K_BL], ARGV[i], ARGV[i + 1]) then
    return -1  -- the hash has the wrong type: sent again inline, which repairs it first
  end
end
local function index()
  next_generation()  -- a retention deletion planned before this one is void
  redis.call('HSET', KEYS[K_CP], ARGV[3], ARGV[4])
  if ARGV[5] ~= '' then redis.call('HSET', KEYS[K_RUNS], ARGV[3], ARGV[5]) end
  redis.call('ZADD', KEYS[K_CPS], '0', ARGV[3])
  local timeline = timeline_of(ARGV[3])
  if timeline then redis.call('ZADD', KEYS[K_SUB], '0', timeline) end
  if ARGV[#ARGV] ~= '' then redis.call('HSET', KEYS[K_HEAD], ARGV[#ARGV - 1], ARGV[#ARGV]) end
end
if not repairing(index, ARGV[1]) then
  touch(ARGV[1])  -- the values sent stay for the resend with the twins: not without a ttl
  return redis.error_reply('LGD_REPAIR')
end
-- A new checkpoint ends a wait on an interrupt(), except the late write (durability
-- "async") of the very checkpoint whose task is waiting.
if ARGV[1] ~= '0' then  -- "0": no ttl, nothing to arm
  local ttl = tonumber(ARGV[1])
  if ttl and ttl > 0 and interrupted(ARGV[3]) then persist() else arm(ARGV[1]) end
end
if ARGV[6] == '' then return 0 end
return redis.call('ZLEXCOUNT', KEYS[K_CPS], ARGV[6], ARGV[7])
