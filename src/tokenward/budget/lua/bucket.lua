-- bucket.lua: helpers shared by reserve.lua and settle.lua; prepended to each script
-- when it is loaded (Redis scripts cannot import), so the refill arithmetic, which must
-- match policy.py, is written once.

-- An integer as Redis stores it (no exponent, no fraction).
local function num(x) return string.format('%.0f', x) end

-- A bucket's level refilled up to `now`: stored level `l` at time `t` (epoch ms) grows by
-- `rate` per ms up to `capacity`; a bucket never written is full.
local function refilled(key, capacity, rate, now)
  local state = redis.call('HMGET', key, 'l', 't')
  local level, ts = capacity, now
  if state[1] then
    level, ts = tonumber(state[1]), tonumber(state[2])
    if now > ts then
      level = level + (now - ts) * rate
      if level > capacity then level = capacity end
      ts = now
    end
  end
  return level, ts
end

