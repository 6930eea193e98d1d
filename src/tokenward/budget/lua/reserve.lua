-- reserve.lua: one reservation against every check of one namespace, all or nothing.
-- Mirrors policy.reserve (src/tokenward/budget/policy.py) step for step.
--
-- KEYS[1]    the reservation record (hash: c = recorded checks, k = their keys)
-- KEYS[2]    the namespace's leases (zset: reservation id -> lease expiry, epoch ms)
-- KEYS[2+i]  check i's stored value (i = 1..n): a bucket "level ts" string (ts in ms),
--            or a gauge / spend integer
--            (every key shares the namespace's {hash tag}: one Redis Cluster slot)
-- ARGV[1]    now (epoch ms)                ARGV[2] reservation id
-- ARGV[3]    lease expiry (epoch ms)       ARGV[4] n, the number of checks
-- ARGV[4+i]  check i's amount (i = 1..n)
-- ARGV[4 + n + 5(i-1) + 1 .. 5]  check i: kind (B|P|G|S), unit (t|c|r|s), p1, p2,
--            enforce (1 enforced, 0 shadow); amounts first, so a caller can send this
--            unchanging tail as bytes it encoded once
-- Returns {status (1 reserved, 2 already reserved, 0 refused), failed check (1-based, 0 if
--          none), retry_ms (-1: no honest value), shadow checks ("2,5" or ""),
--          level_1 .. level_n (scaled bucket level, gauge count or spent; after the call
--          when reserved, before it when refused)}
local SCALE = 60000
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[4])

-- num(), refilled() and store_bucket() come from bucket.lua, prepended at load.

if redis.call('EXISTS', KEYS[1]) == 1 then
  return {2, 0, 0, ''}
end

local kinds, units, p1s, p2s, amounts, debits = {}, {}, {}, {}, {}, {}
local levels, stamps, befores = {}, {}, {}
local failed, retry, shadow, carry = 0, 0, {}, -1

for i = 1, n do
  local a = 4 + n + 5 * (i - 1)
  local kind, p1, p2 = ARGV[a + 1], tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  local amount, enforce = tonumber(ARGV[4 + i]), ARGV[a + 5] == '1'
  kinds[i], units[i], p1s[i], p2s[i], amounts[i], debits[i] = kind, ARGV[a + 2], p1, p2, amount, 0
  -- the check after a soft one takes what it left; its own amount is the same total
  local need = amount
  if carry >= 0 then need = carry end
  carry = -1
  local fits = true
  if kind == 'B' or kind == 'P' then
    local level, ts = refilled(KEYS[2 + i], p1, p2, now)
    befores[i] = level
    local scaled = need * SCALE
    if kind == 'P' then
      local take = math.min(math.floor(level / SCALE), need)
      carry = need - take
      debits[i] = take
      level = level - take * SCALE
    elseif scaled <= level then
      debits[i] = need
      level = level - scaled
    else
      fits = false
      if enforce then
        local w = -1
        if scaled <= p1 and p2 > 0 then w = math.ceil((scaled - level) / p2) end
        if w < 0 or retry < 0 then retry = -1 elseif w > retry then retry = w end
      end
    end
    levels[i], stamps[i] = level, ts
  else
    local current = tonumber(redis.call('GET', KEYS[2 + i]) or '0')
    befores[i] = current
    fits = current + need <= p1
    if fits or not enforce then
      debits[i] = need
      current = current + need
    else
      retry = -1
    end
    levels[i] = current
  end
  if not fits then
    if enforce then
      if failed == 0 then failed = i end
    else
      shadow[#shadow + 1] = i
    end
  end
end

local out
if failed > 0 then
  out = {0, failed, retry, table.concat(shadow, ',')}
  for i = 1, n do out[4 + i] = befores[i] end
  return out
end

local recorded = {}
for i = 1, n do
  local key, kind = KEYS[2 + i], kinds[i]
  if kind == 'B' or kind == 'P' then
    store_bucket(key, levels[i], stamps[i], p1s[i], p2s[i])
  elseif kind == 'G' then
    redis.call('SET', key, levels[i])
  else
    redis.call('SET', key, levels[i], 'PXAT', p2s[i])   -- gone when its period ends
  end
  -- p1, p2 and the amount as the caller sent them (integers in decimal): formatting a
  -- number costs more than anything else here, so only the debit is formatted.
  local a = 4 + n + 5 * (i - 1)
  recorded[i] = kind .. ' ' .. units[i] .. ' ' .. ARGV[a + 3] .. ' ' .. ARGV[a + 4] .. ' '
    .. ARGV[4 + i] .. ' ' .. num(debits[i])
end
redis.call('HSET', KEYS[1], 'c', table.concat(recorded, ' '), 'k', table.concat(KEYS, ' ', 3))
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
out = {1, 0, 0, table.concat(shadow, ',')}
for i = 1, n do out[4 + i] = levels[i] end
return out
