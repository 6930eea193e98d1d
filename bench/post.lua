-- wrk script for the benchmarks: POST a small chat completion, optionally with an API
-- key (BENCH_API_KEY), and print one machine-readable line at the end:
--   BENCH_JSON {"requests":..., "p50_us":..., "p99_us":..., errors...}
-- Latency percentiles are wrk's own (closed loop: each connection waits for its answer).

wrk.method = "POST"
wrk.body = os.getenv("BENCH_BODY") or
  '{"model":"bench-chat","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}'
wrk.headers["Content-Type"] = "application/json"
-- BENCH_UNIQUE=1: every request different (a run stamp and a counter at the prompt's start),
-- so nothing a gateway remembers per prompt (a cache, a detector's memory) is reused
if os.getenv("BENCH_UNIQUE") == "1" then
  local stamp, count = tostring(os.time()), 0
  local head, tail = wrk.body:match('^(.-"content":%s*")(.*)$')
  assert(head, 'BENCH_UNIQUE: the body has no "content" string to stamp')
  request = function()
    count = count + 1
    return wrk.format(nil, nil, nil, head .. "#" .. stamp .. "-" .. count .. " " .. tail)
  end
end
local key = os.getenv("BENCH_API_KEY")
if key and key ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. key
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect_errors":%d,"read_errors":%d,' ..
    '"write_errors":%d,"status_errors":%d,"timeout_errors":%d,"p50_us":%d,"p75_us":%d,"p90_us":%d,' ..
    '"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(75), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
