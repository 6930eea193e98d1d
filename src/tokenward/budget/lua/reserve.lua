-- reserve.lua: one reservation against every check of one namespace, all or nothing.
-- Mirrors policy.reserve (src/tokenward/budget/policy.py) step for step.
--
-- KEYS[1]    the namespace's hash: its values and open reservations (see state.lua)
-- KEYS[2]    the namespace's leases (zset: reservation id -> lease expiry, epoch ms)
-- KEYS[2+i]  where an earlier version kept check i's value (read only while its field is missing)
--            (every key shares the namespace's {hash tag}: one Redis Cluster slot)
-- ARGV[1]    now (epoch ms)     ARGV[2] reservation id     ARGV[3] lease expiry (epoch ms)
-- ARGV[4]    the checks, five little-endian doubles each: kind (1 bucket, 2 soft bucket,
--            3 gauge, 4 spend, 5 job, 6 ancestor job), unit (1 tokens, 2 cost, 3 request, 4 slot), p1, p2,
--            enforce (1 enforced, 0 shadow); the same for every call of a layout, so the
--            caller encodes it once
-- ARGV[5]    the amounts, one little-endian double per check
-- ARGV[5+i]  check i's field in KEYS[1] (i = 1..n)
-- Writes the field "r:<id>": "<d" n, ARGV[4], ARGV[5], the debits ("<d" each), then the
-- fields and the earlier keys, space-separated, a newline between them.
-- Returns {status (1 reserved, 2 already reserved, 0 refused), failed check (1-based, 0 if
--          none), retry_ms (-1: no honest value), shadow checks ("2,5" or ""),
--          level_1 .. level_n (scaled bucket level, gauge count or spent; after the call
--          when reserved, before it when refused)}

-- SCALE, the kinds, legacy_value(), refilled(), counted() and packed() come from state.lua.

local now = tonumber(ARGV[1])
local n = #ARGV - 5
local fields = {}
for i = 1, n do fields[i] = ARGV[5 + i] end
local record_field = 'r:' .. ARGV[2]
fields[n + 1] = record_field
local stored = redis.call('HMGET', KEYS[1], unpack(fields))
if stored[n + 1] then
  return {2, 0, 0, ''}
end

local spec = {struct.unpack('<' .. string.rep('d', 5 * n), ARGV[4])}
local amounts = {struct.unpack('<' .. string.rep('d', n), ARGV[5])}
local writes, debits, levels, befores, shadow, migrated = {}, {}, {}, {}, {}, {}
local failed, retry, carry = 0, 0, -1

for i = 1, n do
  local s = 5 * (i - 1)
  local kind, p1, p2, enforce = spec[s + 1], spec[s + 3], spec[s + 4], spec[s + 5] == 1
  local raw = stored[i]
  if not raw and kind < JOB then
    raw = legacy_value(KEYS[2 + i], kind, p2)
    if raw then migrated[#migrated + 1] = KEYS[2 + i] end
  end
  -- the check after a soft one takes what it left; its own amount is the same total
  local need = amounts[i]
  if carry >= 0 then need = carry end
  carry = -1
  debits[i] = 0
  local fits, a, b, w = true, 0, 0, nil
  if kind <= SOFT then
    local level, ts = refilled(raw, p1, p2, now)
    befores[i] = level
    local scaled = need * SCALE
    if kind == SOFT then
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
    a, b = level, ts
  elseif kind >= JOB then
    -- an agent job (policy.reserve's J and A checks): its value must exist
    local j = raw and job_unpack(raw)
    a = j and j[1] or -1
    befores[i] = a
    if kind == JOB then
      fits = j and j[7] == JOB_OPEN and now < j[8] and j[1] + need <= p1 and (p2 <= 0 or j[4] < p2)
      if fits then
        debits[i] = need
        j[1], j[2], j[4], j[5] = j[1] + need, j[2] + need, j[4] + 1, j[5] + 1
        a, w = j[1], job_pack(j)
      end
    else
      fits = j and j[7] ~= JOB_CANCELLED and now < j[8]
      w = raw
    end
    if not fits then
      fits, enforce, retry, w = false, true, -1, ''
    end
  else
    local current, period = counted(raw, kind, p2)
    befores[i] = current
    fits = current + need <= p1
    if fits or not enforce then
      debits[i] = need
      current = current + need
    else
      retry = -1
    end
    a, b = current, period
  end
  levels[i] = a
  writes[2 * i - 1], writes[2 * i] = fields[i], w or packed(kind, a, b)
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

writes[2 * n + 1] = record_field
writes[2 * n + 2] = struct.pack('<d', n) .. ARGV[4] .. ARGV[5] .. struct.pack('<' .. string.rep('d', n), unpack(debits))
  .. table.concat(fields, ' ', 1, n) .. '\n' .. table.concat(KEYS, ' ', 3)
redis.call('HSET', KEYS[1], unpack(writes))
redis.call('PEXPIRE', KEYS[1], KEEP_MS)
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
if #migrated > 0 then redis.call('DEL', unpack(migrated)) end
out = {1, 0, 0, table.concat(shadow, ',')}
for i = 1, n do out[4 + i] = levels[i] end
return out
