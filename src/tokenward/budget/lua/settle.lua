-- settle.lua: settle one reservation against actual usage, exactly once.
-- Mirrors policy.settle (src/tokenward/budget/policy.py) step for step.
--
-- KEYS[1]    the reservation record (hash: c = recorded checks, k = their keys)
-- KEYS[2]    the namespace's leases (zset: reservation id -> lease expiry, epoch ms)
-- KEYS[2+i]  check i's stored value, in the order reserved (the record's k field)
--            (every key shares the namespace's {hash tag}: one Redis Cluster slot)
-- ARGV[1]    now (epoch ms)    ARGV[2] actual tokens    ARGV[3] actual cost units
-- ARGV[4]    mode: s settle on usage, f charge in full, z void (undo every debit),
--            x charge in full only if the lease has expired (the reconciler)
-- ARGV[5]    reservation id
-- Returns 1 settled now, 0 no such reservation (already settled), -1 lease still live (x)
local SCALE = 60000
local now = tonumber(ARGV[1])
local tokens, cost, mode, id = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]

-- num(), refilled() and store_bucket() come from bucket.lua, prepended at load.

local raw = redis.call('HGET', KEYS[1], 'c')
if not raw then
  redis.call('ZREM', KEYS[2], id)   -- an orphaned lease, if any
  return 0
end
if mode == 'x' then
  local until_ms = redis.call('ZSCORE', KEYS[2], id)
  if until_ms and tonumber(until_ms) > now then return -1 end
  mode = 'f'
end

local f = {}
for word in string.gmatch(raw, '%S+') do f[#f + 1] = word end
if #f ~= 6 * (#KEYS - 2) then
  return redis.error_reply('settle keys do not match reservation ' .. id)
end

local attributed = 0
for i = 1, #KEYS - 2 do
  local a = 6 * (i - 1)
  local kind, unit = f[a + 1], f[a + 2]
  local p1, p2 = tonumber(f[a + 3]), tonumber(f[a + 4])
  local amount, debit = tonumber(f[a + 5]), tonumber(f[a + 6])
  local key = KEYS[2 + i]
  local actual
  if mode == 'z' then actual = 0
  elseif mode ~= 's' or unit == 'r' then actual = amount
  elseif unit == 't' then actual = tokens
  elseif unit == 'c' then actual = cost
  else actual = 0 end
  actual = actual - attributed
  attributed = 0
  if kind == 'B' or kind == 'P' then
    if kind == 'P' then
      attributed = math.min(math.max(actual, 0), debit)
      actual = attributed
    end
    local level, ts = refilled(key, p1, p2, now)
    level = level + (debit - actual) * SCALE
    if level < 0 then level = 0 elseif level > p1 then level = p1 end
    store_bucket(key, level, ts, p1, p2)
  elseif kind == 'G' then
    local left = tonumber(redis.call('GET', key) or '0') - debit
    if left > 0 then redis.call('SET', key, left) else redis.call('DEL', key) end
  else
    local spent = tonumber(redis.call('GET', key) or '0') + actual - debit
    if spent < 0 then spent = 0 end
    redis.call('SET', key, spent, 'PXAT', p2)   -- gone when its period ends
  end
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], id)
return 1
