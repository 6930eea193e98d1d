-- One subject's batch of observations (abuse/state.py is the same in Python).
-- KEYS[1] the subject's hash, KEYS[2] its networks (zset: last seen), KEYS[3] its
-- capabilities (zset: last seen), KEYS[4] its events per minute (hash), one hash tag.
-- ARGV: now, retention_s, baseline_days, min_history_s, novelty_s, refusal_minutes,
-- max_networks, max_capabilities, requests, output, at_max, refusals, then n and n
-- (name, count) pairs three times: networks, capabilities, events.
-- Returns {hour_output, hour_requests, hour_at_max, hour_new_network,
-- hour_new_capability, refusals, baseline_sum, baseline_days, trusted}.
local H, N, C, E = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, retention, baseline_days = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local min_history, novelty, refusal_minutes = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local max_nets, max_caps = tonumber(ARGV[7]), tonumber(ARGV[8])

redis.call('HSETNX', H, 'since', now)
local since = tonumber(redis.call('HGET', H, 'since'))
local hour = math.floor(now / 3600)
local stored = tonumber(redis.call('HGET', H, 'hour') or '-1')
if hour > stored then
  if stored >= 0 then
    local field = 'd:' .. math.floor(stored / 24)
    local ho = tonumber(redis.call('HGET', H, 'ho') or '0')
    if ho > tonumber(redis.call('HGET', H, field) or '0') then redis.call('HSET', H, field, ho) end
  end
  redis.call('HSET', H, 'hour', hour, 'ho', 0, 'hr', 0, 'hm', 0, 'hn', 0, 'hc', 0)
  local oldest = math.floor(hour / 24) - math.floor(retention / 86400)
  for _, field in ipairs(redis.call('HKEYS', H)) do
    if string.sub(field, 1, 2) == 'd:' and tonumber(string.sub(field, 3)) < oldest then redis.call('HDEL', H, field) end
  end
end
redis.call('HSET', H, 'seen', now)
redis.call('HINCRBY', H, 'hr', ARGV[9])
redis.call('HINCRBY', H, 'ho', ARGV[10])
redis.call('HINCRBY', H, 'hm', ARGV[11])

local function seen(zkey, prefix, base, limit)
  local n, new = tonumber(ARGV[base]), 0
  for i = 1, n do
    local name, count = ARGV[base + 2 * i - 1], tonumber(ARGV[base + 2 * i])
    local first = tonumber(redis.call('HGET', H, prefix .. name))
    if not first then first = now; redis.call('HSET', H, prefix .. name, now) end
    redis.call('ZADD', zkey, now, name)
    if now - first < novelty and first - since >= min_history then new = new + count end
  end
  local cut = '(' .. (now - retention)
  for _, name in ipairs(redis.call('ZRANGEBYSCORE', zkey, '-inf', cut)) do redis.call('HDEL', H, prefix .. name) end
  redis.call('ZREMRANGEBYSCORE', zkey, '-inf', cut)
  local extra = redis.call('ZCARD', zkey) - limit
  if extra > 0 then
    local popped = redis.call('ZPOPMIN', zkey, extra)
    for j = 1, #popped, 2 do redis.call('HDEL', H, prefix .. popped[j]) end
  end
  return new, base + 2 * n + 1
end
local new_net, next_base = seen(N, 'nf:', 13, max_nets)
local new_cap, events_base = seen(C, 'cf:', next_base, max_caps)
redis.call('HINCRBY', H, 'hn', new_net)
redis.call('HINCRBY', H, 'hc', new_cap)

local minute = math.floor(now / 60)
local slot = minute % 10
if tonumber(redis.call('HGET', H, 'rm' .. slot) or '-1') ~= minute then
  redis.call('HSET', H, 'rm' .. slot, minute, 'rc' .. slot, 0)
end
redis.call('HINCRBY', H, 'rc' .. slot, ARGV[12])
local refusals = 0
for i = 0, 9 do
  local m = tonumber(redis.call('HGET', H, 'rm' .. i) or '-1')
  if m > minute - refusal_minutes then refusals = refusals + tonumber(redis.call('HGET', H, 'rc' .. i) or '0') end
end

local n_events = tonumber(ARGV[events_base])
if n_events > 0 then
  for i = 1, n_events do
    redis.call('HINCRBY', E, minute .. '|' .. ARGV[events_base + 2 * i - 1], ARGV[events_base + 2 * i])
  end
  for _, field in ipairs(redis.call('HKEYS', E)) do
    if tonumber(string.match(field, '^(%d+)|')) <= minute - 60 then redis.call('HDEL', E, field) end
  end
end

local today = math.floor(hour / 24)
local bsum, bn = 0, 0
for _, field in ipairs(redis.call('HKEYS', H)) do
  if string.sub(field, 1, 2) == 'd:' then
    local day = tonumber(string.sub(field, 3))
    local v = tonumber(redis.call('HGET', H, field))
    if day >= today - baseline_days and day <= today and v > 0 then bsum = bsum + v; bn = bn + 1 end
  end
end
local ms = retention * 1000
for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ms) end
local trusted = 0
if now - since >= min_history then trusted = 1 end
return {tonumber(redis.call('HGET', H, 'ho')), tonumber(redis.call('HGET', H, 'hr')),
        tonumber(redis.call('HGET', H, 'hm')), tonumber(redis.call('HGET', H, 'hn')),
        tonumber(redis.call('HGET', H, 'hc')), refusals, bsum, bn, trusted}
