-- One prompt's band of a campaign: who sent near-duplicate prompts lately.
-- KEYS[1] the band's bucket (zset: member "<tenant>\31<key id>", score last seen).
-- ARGV: now, window_s, max_members, member, max_listed. Returns {distinct keys, distinct
-- tenants, then up to max_listed of the members, most recent first}.
local now, window, max_members = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - window))
local extra = redis.call('ZCARD', KEYS[1]) - max_members
if extra > 0 then redis.call('ZPOPMIN', KEYS[1], extra) end
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local tenants, count = {}, 0
for _, member in ipairs(members) do
  local tenant = string.match(member, '^(.-)\31')
  if tenant and not tenants[tenant] then tenants[tenant] = true; count = count + 1 end
end
redis.call('PEXPIRE', KEYS[1], window * 1000)
local out = {#members, count}
for _, member in ipairs(redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[5]) - 1)) do out[#out + 1] = member end
return out
