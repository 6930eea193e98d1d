-- settle.lua: settle one reservation against actual usage, exactly once.
-- Mirrors policy.settle (src/tokenward/budget/policy.py) step for step.
--
-- KEYS[1]    the namespace's hash: its values and open reservations (see state.lua)
-- KEYS[2]    the namespace's leases (zset: reservation id -> lease expiry, epoch ms)
-- KEYS[3]    where an earlier version kept this reservation's record (an {c, k} hash)
-- KEYS[3+i]  where an earlier version kept check i's value, in the order reserved
--            (every key shares the namespace's {hash tag}: one Redis Cluster slot)
-- ARGV[1]    now (epoch ms)    ARGV[2] actual tokens    ARGV[3] actual cost units
-- ARGV[4]    mode: s settle on usage, f charge in full, z void (undo every debit),
--            x charge in full only if the lease has expired (the reconciler); a job's
--            reservation that was never dispatched (no field "d:<id>", job_dispatch.lua)
--            is settled as unused instead: nothing reached a backend
-- ARGV[5]    reservation id
-- ARGV[5+i]  check i's field in KEYS[1], as reserved; optional (read from the record
--            when absent, one more command)
-- Returns 1 settled now, 0 no such reservation (already settled), -1 lease still live (x)

-- SCALE, the kinds, legacy_value(), refilled(), counted() and packed() come from state.lua.

local now = tonumber(ARGV[1])
local tokens, cost, mode, id = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local record_field = 'r:' .. id
local fields = {record_field}
for i = 6, #ARGV do fields[i - 4] = ARGV[i] end
local stored = redis.call('HMGET', KEYS[1], unpack(fields))
local record = stored[1]

local expired = false
if mode == 'x' then
  local until_ms = redis.call('ZSCORE', KEYS[2], id)
  if until_ms and tonumber(until_ms) > now then return -1 end
  mode, expired = 'f', true
end

local n, spec, amounts, debits, legacy
if record then
  n = struct.unpack('<d', record)
  spec = {struct.unpack('<' .. string.rep('d', 5 * n), record, 9)}
  amounts = {struct.unpack('<' .. string.rep('d', n), record, 9 + 40 * n)}
  debits = {struct.unpack('<' .. string.rep('d', n), record, 9 + 48 * n)}
  if #fields == 1 then
    local names = string.sub(record, 9 + 56 * n, string.find(record, '\n', 9 + 56 * n, true) - 1)
    for name in string.gmatch(names, '%S+') do fields[#fields + 1] = name end
    stored = redis.call('HMGET', KEYS[1], unpack(fields))
  end
else
  -- a reservation recorded by an earlier version: "kind unit p1 p2 amount debit" per check
  local old = redis.pcall('HGET', KEYS[3], 'c')
  if type(old) ~= 'string' then
    redis.call('ZREM', KEYS[2], id)   -- an orphaned lease, if any
    return 0
  end
  local kinds, units = {B = BUCKET, P = SOFT, G = GAUGE, S = SPEND}, {t = 1, c = 2, r = 3, s = 4}
  local words = {}
  for word in string.gmatch(old, '%S+') do words[#words + 1] = word end
  n, spec, amounts, debits, legacy = #words / 6, {}, {}, {}, true
  if #KEYS - 3 ~= n then
    return redis.error_reply('settle keys do not match reservation ' .. id)
  end
  for i = 1, n do
    local w = 6 * (i - 1)
    spec[5 * i - 4], spec[5 * i - 3] = kinds[words[w + 1]], units[words[w + 2]]
    spec[5 * i - 2], spec[5 * i - 1], spec[5 * i] = tonumber(words[w + 3]), tonumber(words[w + 4]), 1
    amounts[i], debits[i] = tonumber(words[w + 5]), tonumber(words[w + 6])
    -- its field: the key after the namespace, a spend key without its period
    local name = string.sub(KEYS[3 + i], #KEYS[1] + 2)
    if spec[5 * i - 4] == SPEND then name = string.match(name, '^(.*):') end
    fields[i + 1] = name
  end
  stored = redis.call('HMGET', KEYS[1], unpack(fields))
end
if #fields ~= n + 1 then
  return redis.error_reply('settle fields do not match reservation ' .. id)
end

local writes, migrated, gone, attributed = {}, {}, {record_field}, 0
if spec[1] == JOB then
  -- a job's reservation (its job check comes first): its dispatch mark goes with it; one
  -- never dispatched and abandoned (the reconciler) is settled as unused, like a request
  -- no backend saw
  gone[#gone + 1] = 'd:' .. id
  if expired and redis.call('HEXISTS', KEYS[1], 'd:' .. id) == 0 then
    mode, tokens, cost = 's', 0, 0
  end
end
for i = 1, n do
  local s = 5 * (i - 1)
  local kind, unit, p1, p2 = spec[s + 1], spec[s + 2], spec[s + 3], spec[s + 4]
  local amount, debit = amounts[i], debits[i]
  local raw = stored[i + 1]
  if not raw and legacy then
    raw = legacy_value(KEYS[3 + i], kind, p2)
    if raw then migrated[#migrated + 1] = KEYS[3 + i] end
  end
  local actual
  if mode == 'z' then actual = 0
  elseif mode ~= 's' or unit == 3 then actual = amount
  elseif unit == 1 then actual = tokens
  elseif unit == 2 then actual = cost
  else actual = 0 end
  -- within [0, amount]: never charged more than reserved, never refunded more (policy.settle)
  if mode == 's' and unit ~= 3 then
    if actual < 0 then actual = 0 elseif actual > amount then actual = amount end
  end
  actual = actual - attributed
  attributed = 0
  local a, b
  if kind <= SOFT then
    if kind == SOFT then
      attributed = math.min(math.max(actual, 0), debit)
      actual = attributed
    end
    local level, ts = refilled(raw, p1, p2, now)
    level = level + (debit - actual) * SCALE
    if level < 0 then level = 0 elseif level > p1 then level = p1 end
    a, b = level, ts
  elseif kind == GAUGE then
    a, b = math.max(counted(raw, kind, 0) - debit, 0), 0
    if a == 0 then
      gone[#gone + 1] = fields[i + 1]   -- a gauge at zero is no field, as in the memory store
      a = nil
    end
  elseif kind == JOB then
    -- charged the actual amount, never more than reserved (policy._settle_job)
    if raw then
      local j = job_unpack(raw)
      local charged = math.min(math.max(actual, 0), debit)
      j[1], j[2], j[5] = math.max(j[1] - debit + charged, 0), math.max(j[2] - debit, 0), math.max(j[5] - 1, 0)
      if mode == 'z' then j[4] = math.max(j[4] - 1, 0) end
      writes[#writes + 1] = fields[i + 1]
      writes[#writes + 1] = job_pack(j)
    end
  elseif kind == ANCESTOR then
    a = nil
  else
    local spent, period = counted(raw, kind, p2)
    -- a later period has begun: this reservation's period is closed, nothing to adjust
    if period == p2 then a, b = math.max(spent + actual - debit, 0), p2 end
  end
  if a then
    writes[#writes + 1] = fields[i + 1]
    writes[#writes + 1] = packed(kind, a, b)
  end
end
if #writes > 0 then redis.call('HSET', KEYS[1], unpack(writes)) end
if legacy then
  migrated[#migrated + 1] = KEYS[3]
  redis.call('DEL', unpack(migrated))
end
redis.call('HDEL', KEYS[1], unpack(gone))
redis.call('ZREM', KEYS[2], id)
return 1
