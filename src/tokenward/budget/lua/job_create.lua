-- job_create.lua: create an agent job, all or nothing. Mirrors job_policy.create.
--
-- KEYS[1]    the tenant's namespace hash (see state.lua)
-- KEYS[2]    the tenant's open jobs (zset: job id -> deadline, epoch ms)
--            (both share the namespace's {hash tag}: one Redis Cluster slot)
-- ARGV[1]    now (epoch ms)    ARGV[2] the new job's id    ARGV[3] its deadline (epoch ms)
-- ARGV[4]    its budget        ARGV[5] jobs_per_minute      ARGV[6] max_open_jobs
-- ARGV[7]    its fixed terms (JSON, stored as given in field "j:<id>:m")
-- ARGV[8]    its parent's id, or "" for none
-- ARGV[9]    the parent's budget    ARGV[10] the parent's max_children (0: no limit)
-- ARGV[11..] the parent's own ancestors' ids, nearest first
-- Writes "j:<id>" (its counters), "j:<id>:m"; the parent's counters (its budget carved)
-- and "j:<parent>:c" (its children's ids, space-separated); the "b:jobs" bucket.
-- Returns {status, retry_ms}: 1 created, 2 jobs_per_minute (retry_ms: the honest wait),
--   3 max_open_jobs, 4 no such parent, 5 parent closed (not open, expired, or an ancestor
--   cancelled or expired), 6 parent's max_children, 7 parent's remaining allowance

local now, id, deadline, budget = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local per_minute, max_open, parent = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[8]
local fields = {'b:jobs'}
if parent ~= '' then
  fields[2], fields[3] = 'j:' .. parent, 'j:' .. parent .. ':c'
  for i = 11, #ARGV do fields[#fields + 1] = 'j:' .. ARGV[i] end
end
local stored = redis.call('HMGET', KEYS[1], unpack(fields))
local writes = {}
if parent ~= '' then
  if not stored[2] then return {4, -1} end
  local p = job_unpack(stored[2])
  if p[7] ~= JOB_OPEN or now >= p[8] then return {5, -1} end
  for i = 4, #fields do
    if job_usable(stored[i], now) ~= 0 then return {5, -1} end
  end
  local max_children = tonumber(ARGV[10])
  if max_children > 0 and p[6] >= max_children then return {6, -1} end
  if p[1] + budget > tonumber(ARGV[9]) then return {7, -1} end
  p[1], p[3], p[6] = p[1] + budget, p[3] + budget, p[6] + 1
  local children = stored[3] and (stored[3] .. ' ' .. id) or id
  writes = {fields[2], job_pack(p), fields[3], children}
end
local level, ts = refilled(stored[1], per_minute * SCALE, per_minute, now)
if level < SCALE then return {2, math.ceil((SCALE - level) / per_minute)} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)   -- expired: the deadline has come
if redis.call('ZCARD', KEYS[2]) >= max_open then return {3, -1} end
writes[#writes + 1] = 'b:jobs'
writes[#writes + 1] = packed(BUCKET, level - SCALE, ts)
writes[#writes + 1] = 'j:' .. id
writes[#writes + 1] = job_pack({0, 0, 0, 0, 0, 0, JOB_OPEN, deadline})
writes[#writes + 1] = 'j:' .. id .. ':m'
writes[#writes + 1] = ARGV[7]
redis.call('HSET', KEYS[1], unpack(writes))
redis.call('PEXPIRE', KEYS[1], KEEP_MS)
redis.call('ZADD', KEYS[2], deadline, id)
redis.call('PEXPIRE', KEYS[2], KEEP_MS)
return {1, 0}
