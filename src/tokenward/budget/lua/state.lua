-- state.lua: what reserve.lua and settle.lua share; prepended to each when it is loaded
-- (Redis scripts cannot import), so the arithmetic that must match policy.py is written once.
--
-- A namespace keeps its values in one hash (the key is the namespace itself), one field
-- per value, so a script reads them all with one HMGET and writes them with one HSET.
-- Each value is packed with `struct` (one C call each way, no number formatting or
-- parsing in Lua, exact: every value is an integer below 2^53):
--   bucket  "<Bdd"  1, level (scaled), ts (epoch ms)
--   gauge   "<Bd"   3, count
--   spend   "<Bdd"  4, spent, the end of its period (p2); a field from an earlier period reads as 0
--   job     "<B8d"  5, used, held, carved, attempts, open, children, state, deadline (ms)
--           (an agent job: policy.JobValue; read by the J and A checks, job_*.lua)
-- An open reservation is the field "r:<id>" (see reserve.lua).
--
-- Earlier versions kept one key per value (a bucket as the text "level ts" or an {l, t}
-- hash, a gauge or spend as a decimal). A field still missing is read from that key once;
-- the key is deleted when the value is written here, so an upgrade needs no migration.

local SCALE = 60000
local BUCKET, SOFT, GAUGE, SPEND, JOB, ANCESTOR = 1, 2, 3, 4, 5, 6
local JOB_OPEN, JOB_EXHAUSTED, JOB_CANCELLED = 0, 1, 2
local KEEP_MS = 40 * 86400000   -- the hash outlives a month's spend period

local function legacy_value(key, kind, p2)
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' and raw.err then
    local h = redis.call('HMGET', key, 'l', 't')
    raw = h[1] and (h[1] .. ' ' .. h[2])
  end
  if not raw then return false end
  local a, b = string.match(raw, '^(%S+) ?(%S*)$')
  if kind <= SOFT then return struct.pack('<Bdd', BUCKET, tonumber(a), tonumber(b)) end
  if kind == GAUGE then return struct.pack('<Bd', GAUGE, tonumber(a)) end
  return struct.pack('<Bdd', SPEND, tonumber(a), p2)
end

-- A bucket's level refilled up to `now`: it grows by `rate` per ms up to `capacity`; a
-- bucket never written is full. A clock behind the stored ts refills nothing.
local function refilled(raw, capacity, rate, now)
  if not raw then return capacity, now end
  local _, level, ts = struct.unpack('<Bdd', raw)
  if now > ts then
    level = level + (now - ts) * rate
    if level > capacity then level = capacity end
    ts = now
  end
  return level, ts
end

-- A gauge's count, or what the period ending at `period` has spent so far; and the period
-- to store with it (a replica whose clock is still in the previous period never moves a
-- spend field back to it).
local function counted(raw, kind, period)
  if not raw then return 0, period end
  if kind == GAUGE then
    local _, count = struct.unpack('<Bd', raw)
    return count, 0
  end
  local _, spent, stored_period = struct.unpack('<Bdd', raw)
  if stored_period < period then return 0, period end
  return spent, stored_period
end

local function packed(kind, a, b)
  if kind <= SOFT then return struct.pack('<Bdd', BUCKET, a, b) end
  if kind == GAUGE then return struct.pack('<Bd', GAUGE, a) end
  return struct.pack('<Bdd', SPEND, a, b)
end

-- An agent job's stored value as a table {used, held, carved, attempts, open, children,
-- state, deadline} (policy.JobValue), and back.
local function job_unpack(raw)
  local _, a, b, c, d, e, f, g, h = struct.unpack('<Bdddddddd', raw)
  return {a, b, c, d, e, f, g, h}
end

local function job_pack(j)
  return struct.pack('<Bdddddddd', JOB, j[1], j[2], j[3], j[4], j[5], j[6], j[7], j[8])
end

-- 0 if a job may still run requests (not cancelled, before its deadline), else why not:
-- 4 gone, 2 cancelled, 3 expired (job_policy.usable)
local function job_usable(raw, now)
  if not raw then return 4 end
  local j = job_unpack(raw)
  if j[7] == JOB_CANCELLED then return 2 end
  if now >= j[8] then return 3 end
  return 0
end
