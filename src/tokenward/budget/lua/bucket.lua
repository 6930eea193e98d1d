-- bucket.lua: helpers shared by reserve.lua and settle.lua; prepended to each script
-- when it is loaded (Redis scripts cannot import), so the refill arithmetic, which must
-- match policy.py, is written once.

-- An integer as Redis stores it (no exponent, no fraction), for building strings. A Lua
-- number passed straight to redis.call is converted in C ("%.17g": exact below 2^53), so
-- values written alone skip this (string.format costs ~1 us a call here).
local function num(x) return string.format('%.0f', x) end

-- A bucket's level refilled up to `now`: stored as "level ts" (level at time ts, epoch ms),
-- it grows by `rate` per ms up to `capacity`; a bucket never written is full. One GET:
-- a string, not a hash, so the write back is one SET with its expiry (two commands fewer
-- per bucket per script). A key still holding the {l, t} hash of an earlier version is
-- read once with HMGET; the next write replaces it.
local function refilled(key, capacity, rate, now)
  local raw = redis.pcall('GET', key)
  if type(raw) == 'table' and raw.err then
    local state = redis.call('HMGET', key, 'l', 't')
    raw = state[1] and (state[1] .. ' ' .. state[2])
  end
  local level, ts = capacity, now
  if raw then
    local l, t = string.match(raw, '^(%S+) (%S+)$')
    level, ts = tonumber(l), tonumber(t)
    if now > ts then
      level = level + (now - ts) * rate
      if level > capacity then level = capacity end
      ts = now
    end
  end
  return level, ts
end

-- Write a bucket back; it expires once it would be full again (a full bucket is a missing one).
local function store_bucket(key, level, ts, capacity, rate)
  local full_in = 0
  if level < capacity and rate > 0 then full_in = math.ceil((capacity - level) / rate) end
  redis.call('SET', key, string.format('%.0f %.0f', level, ts), 'PX', full_in + 60000)
end
