-- sweep.lua: drop the bucket fields of one namespace that have been idle long enough to be
-- full again, so keys that are no longer used (a per-key bucket of a revoked or rotated
-- key) do not stay in the namespace's hash for as long as the tenant is active.
-- Every rate is per minute: a bucket refills its whole capacity in 60 s, so a field last
-- written IDLE_MS ago or earlier is full, which is exactly what a missing field means
-- (refilled() in state.lua). Deleting it changes no answer; IDLE_MS leaves a minute more
-- for replicas whose clocks disagree.
--
-- Agent jobs are dropped a day after their deadline, their three fields together.
--
-- KEYS[1]    the namespace's hash (see state.lua)
-- ARGV[1]    now (epoch ms)    ARGV[2] HSCAN cursor ("0" to start)    ARGV[3] HSCAN COUNT
-- Returns {next cursor ("0" when the scan is done), fields deleted}

-- BUCKET comes from state.lua; Layout (store.py) refuses a bucket slower than a minute.

local IDLE_MS = 120000
local JOB_KEEP_MS = 86400000   -- job_policy.KEEP_AFTER_DEADLINE_MS
local now = tonumber(ARGV[1])
local scan = redis.call('HSCAN', KEYS[1], ARGV[2], 'COUNT', ARGV[3])
local items = scan[2]
local gone = {}
for i = 1, #items, 2 do
  local name, raw = items[i], items[i + 1]
  -- a bucket is "<Bdd" with kind 1 (17 bytes); reservation records ("r:<id>") are never swept
  if #raw == 17 and string.byte(raw, 1) == BUCKET and string.sub(name, 1, 2) ~= 'r:' then
    local _, _, ts = struct.unpack('<Bdd', raw)
    if now - ts >= IDLE_MS then gone[#gone + 1] = name end
  elseif #raw == 65 and string.byte(raw, 1) == JOB and string.sub(name, 1, 2) == 'j:' then
    -- an agent job a day past its deadline: its counters, terms and children's ids
    if now - job_unpack(raw)[8] >= JOB_KEEP_MS then
      gone[#gone + 1] = name
      gone[#gone + 1] = name .. ':m'
      gone[#gone + 1] = name .. ':c'
    end
  end
end
if #gone > 0 then redis.call('HDEL', KEYS[1], unpack(gone)) end
return {scan[1], #gone}
