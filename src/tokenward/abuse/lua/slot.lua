-- A key's open-request slot under a reduce_concurrency action.
-- KEYS[1] the key's slots (zset: request id, score the lease's end in ms).
-- ARGV: now_ms, request id, lease end ms, limit. Returns 1 (taken) or 0 (all in use).
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) - tonumber(ARGV[1]))
return 1
