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
-- BENCH_AGENT_POOL=DIR: an agent's requests, built per request (bench/agent_texts.py writes
-- the pools: JSON-escaped stdlib text, one piece a line). BENCH_SESSIONS=N: N sessions
-- taken in turn, each with its own 16 history messages of 4 KiB (the same every turn, told
-- apart by a "[session S message M]" head) and a new 4 KB message with a unique number;
-- BENCH_SESSIONS=0: one new 64 KiB message per request, unique, no history.
-- BENCH_MODEL names the model; BENCH_STAMP makes this run's numbers its own.
local pool_dir = os.getenv("BENCH_AGENT_POOL")
if pool_dir and pool_dir ~= "" then
  local function lines(name)
    local out = {}
    for line in io.lines(pool_dir .. "/" .. name) do out[#out + 1] = line end
    assert(#out > 0, "empty pool " .. name)
    return out
  end
  local sessions = tonumber(os.getenv("BENCH_SESSIONS") or "1")
  local stamp = os.getenv("BENCH_STAMP") or tostring(os.time())
  local head = '{"model":"' .. (os.getenv("BENCH_MODEL") or "bench-chat") .. '","max_tokens":16,"messages":['
  local count = 0
  if sessions > 0 then
    local history, new = lines("history_4096.txt"), lines("new_4000.txt")
    request = function()
      count = count + 1
      local s = count % sessions
      local parts = {head}
      for m = 0, 15 do
        local role = (m % 2 == 0) and "user" or "assistant"
        parts[#parts + 1] = '{"role":"' .. role .. '","content":"[session ' .. s .. ' message ' .. m .. '] '
          .. history[((s * 16 + m) % #history) + 1] .. '"},'
      end
      parts[#parts + 1] = '{"role":"user","content":"turn ' .. stamp .. '-' .. count .. ': '
        .. new[(count % #new) + 1] .. '"}]}'
      return wrk.format("POST", nil, nil, table.concat(parts))
    end
  else
    local big = lines("new_65536.txt")
    request = function()
      count = count + 1
      return wrk.format("POST", nil, nil, head .. '{"role":"user","content":"#' .. stamp .. '-' .. count .. ' '
        .. big[(count % #big) + 1] .. '"}]}')
    end
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
