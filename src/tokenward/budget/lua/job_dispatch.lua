-- job_dispatch.lua: right before a job's request is sent to a backend: is its job (and
-- every ancestor) still usable, and if so, record that the reservation was dispatched.
-- Mirrors job_policy.usable. The mark tells the reconciler that work may be running at a
-- backend (charged in full when the lease expires); without it, an abandoned reservation
-- is settled as unused (settle.lua).
--
-- KEYS[1]    the tenant's namespace hash (see state.lua)
-- ARGV[1]    now (epoch ms)    ARGV[2] the reservation id
-- ARGV[3..]  the job's id, then its ancestors', nearest first
-- Writes "d:<reservation id>" (now) when usable.
-- Returns 1 usable (marked), 2 cancelled, 3 expired, 4 gone

local now = tonumber(ARGV[1])
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = 'j:' .. ARGV[i] end
local stored = redis.call('HMGET', KEYS[1], unpack(fields))
for i = 1, #fields do
  local why = job_usable(stored[i], now)
  if why ~= 0 then return why end
end
redis.call('HSET', KEYS[1], 'd:' .. ARGV[2], ARGV[1])
return 1
