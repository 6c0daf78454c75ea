-- Leases: one writer per thread (see langgraph_durable/lease.py). The lease holds
-- "owner \0 token" and expires on its own; the fence holds the newest token handed out,
-- which write scripts compare against (fence_denial in _prelude.lua).
-- KEYS: ThreadKeys.for_writes (see _prelude.lua)
-- ARGV: 1 "acquire" | "renew" | "release", 2 owner, 3 lease ttl in ms,
--       4 the fencing token (renew, release), 5 the thread's ttl in seconds or 0
-- Returns: acquire {1, token} or {0, holder, ms left}; renew and release 1 or 0.
local op, owner, lease_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
-- A lease or fence key that is not what this script writes (the wrong type, a lease
-- without "owner \0 token", a fence that is no number) is damage: deleted, as if expired.
-- Safe: the next acquire hands out a token above any before (the clock), so a worker
-- still holding an earlier one is fenced out.
local current, damaged = string_at(K_LEASE)
local holder, held_token
if current then
  holder, held_token = string.match(current, '^(.-)%z(.*)$')
end
if damaged or (current and not holder) then
  redis.call('DEL', KEYS[K_LEASE])
  current = false
end
local fence, fence_damaged = string_at(K_FENCE)
if fence_damaged or (fence and not tonumber(fence)) then
  redis.call('DEL', KEYS[K_FENCE])
  fence = false
end

-- The fence outlives every lease on it and, with a ttl, the thread's data as well.
local function keep_fence()
  local ttl = tonumber(ARGV[5]) or 0
  if ttl > 0 then
    redis.call('EXPIRE', KEYS[K_FENCE], math.max(ttl, math.ceil(lease_ms / 1000) + 1))
  end
end

if op == 'acquire' then
  if current then
    if holder ~= owner then return {0, holder or '?', redis.call('PTTL', KEYS[K_LEASE])} end
    -- A retried acquire whose reply was lost: it is ours already.
    redis.call('PEXPIRE', KEYS[K_LEASE], lease_ms)
    return {1, held_token}
  end
  -- Tokens only grow, even across a deleted or expired fence: the server's clock in
  -- microseconds, or the last token plus one if that is larger.
  local now = redis.call('TIME')
  local last = tonumber(fence or '0') or 0
  local token = string.format('%.0f', math.max(last + 1, now[1] * 1000000 + now[2]))
  redis.call('SET', KEYS[K_FENCE], token)
  keep_fence()
  redis.call('SET', KEYS[K_LEASE], owner .. '\0' .. token, 'PX', lease_ms)
  return {1, token}
elseif op == 'renew' then
  if current and held_token == ARGV[4] then
    redis.call('PEXPIRE', KEYS[K_LEASE], lease_ms)
    keep_fence()
    return 1
  end
  -- Expired while nobody else took the thread: the token is still the newest, take it back.
  if not current and fence == ARGV[4] then
    redis.call('SET', KEYS[K_LEASE], owner .. '\0' .. ARGV[4], 'PX', lease_ms)
    keep_fence()
    return 1
  end
  return 0
elseif op == 'release' then
  if current and held_token == ARGV[4] then
    redis.call('DEL', KEYS[K_LEASE])
    return 1
  end
  return 0
end
return redis.error_reply('LGD_BADOP ' .. tostring(op))
