-- job_close.lua: cancel jobs (a subtree, children first), or mark one exhausted.
-- Mirrors job_policy.close.
--
-- KEYS[1]    the tenant's namespace hash (see state.lua)
-- KEYS[2]    the tenant's open jobs (zset: job id -> deadline)
-- ARGV[1]    the state to move to: 1 exhausted (an open job only), 2 cancelled
-- ARGV[2..]  per job, three values: its id, its budget, and where its parent is in this
--            list (1-based), or 0 when it is not in it; a budget below 0: the job is listed
--            only to take back what a cancelled child hands back (not closed)
-- Cancelling hands each job's unused allowance (budget - used) back to its parent in the
-- list. Every job moved leaves the open jobs.
-- Returns the number of jobs whose state changed.

local state = tonumber(ARGV[1])
local n = (#ARGV - 1) / 3
local fields = {}
for i = 1, n do fields[i] = 'j:' .. ARGV[3 * i - 1] end
local stored = redis.call('HMGET', KEYS[1], unpack(fields))
local jobs, touched, moved = {}, {}, {}
for i = 1, n do
  if stored[i] then jobs[i] = job_unpack(stored[i]) end
end
for i = 1, n do
  local j = jobs[i]
  if j and tonumber(ARGV[3 * i]) >= 0 then
    if state == JOB_EXHAUSTED then
      if j[7] == JOB_OPEN then
        j[7] = JOB_EXHAUSTED
        touched[i] = true
        moved[#moved + 1] = ARGV[3 * i - 1]
      end
    elseif j[7] ~= JOB_CANCELLED then
      j[7] = JOB_CANCELLED
      touched[i] = true
      moved[#moved + 1] = ARGV[3 * i - 1]
      local back = math.max(tonumber(ARGV[3 * i]) - j[1], 0)
      local at = tonumber(ARGV[3 * i + 1])
      local p = at > 0 and jobs[at]
      if back > 0 and p then
        p[1], p[3] = math.max(p[1] - back, 0), math.max(p[3] - back, 0)
        touched[at] = true
      end
    end
  end
end
local writes = {}
for i = 1, n do
  if touched[i] then
    writes[#writes + 1] = fields[i]
    writes[#writes + 1] = job_pack(jobs[i])
  end
end
if #writes > 0 then redis.call('HSET', KEYS[1], unpack(writes)) end
if #moved > 0 then redis.call('ZREM', KEYS[2], unpack(moved)) end
return #moved
