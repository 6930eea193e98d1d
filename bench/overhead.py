"""The gateway's own overhead, measured: the same load through the gateway and directly to
the backend, in the same run, on pinned CPUs (gateway on CPU 0; backend, load generator
and redis on CPU 1).

    python bench/overhead.py [--duration 10] [--pipeline foundation|full] [--json out.json]
                             [--conns 32,8] [--streams 1000] [--no-stream] [--profile DIR]

Non-streaming: wrk (bench/post.lua) at each concurrency, direct then through the gateway;
throughput, errors, p50/p99 and the added p50/p99 (gateway minus direct), plus CPU time
per request of each process (from /proc), so a saturated load CPU is visible.
Streaming: bench/stream_client.py opens --streams SSE streams at --rate chunks/s each,
direct then through the gateway; one-way chunk delay and inter-chunk gap percentiles,
the added p99 (gateway minus direct) and stalled streams (a gap over 1 s, a missing chunk
or a failed stream).

Every process it starts is stopped on exit; the whole script is bounded by an alarm.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    BENCH_DIR, GATEWAY_CPU, LOAD_CPU, PYTHON, REPO, BenchError, Proc, Procs, children_cpu, cpu_busy, http_post, machine, post_when_up,
    pinned, raise_fd_limit, require, run_wrk, set_priority, wait_quiet, run_main,
)
from agent_texts import write_pools  # noqa: E402
from nginx_ref import start_nginx  # noqa: E402
from profile_gateway import profile_during  # noqa: E402
from tensorzero_ref import MODEL as TENSORZERO_MODEL, VERSION as TENSORZERO_VERSION, start_tensorzero  # noqa: E402

CHAT = "/v1/chat/completions"
PROBE_BODY = b'{"model":"bench-chat","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}'
SMALL_BODY = '{"model":"%s","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}'
# --pipeline examples: examples/gateway.yaml as shipped, every stage it turns on; its plan
# `team` through tenant acme, model small-chat (tiktoken o200k_base)
EXAMPLES_TENANT, EXAMPLES_MODEL = "acme", "small-chat"


def start_backend(procs: Procs, rate: float) -> tuple[Proc, str]:
    proc = procs.start("backend", [PYTHON, str(BENCH_DIR / "backend.py"), "--port", "0", "--rate", str(rate)],
                       LOAD_CPU)
    port = proc.wait_line(r"backend listening on http://127\.0\.0\.1:(\d+)").group(1)
    return proc, f"http://127.0.0.1:{port}"


def start_redis(procs: Procs, tmp: Path) -> str:
    require("redis-server")
    sock = tmp / "redis.sock"
    procs.start("redis", ["redis-server", "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
                          "--save", "", "--appendonly", "no", "--dir", str(tmp)], LOAD_CPU)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if sock.exists() and subprocess.run(["redis-cli", "-s", str(sock), "ping"], capture_output=True,
                                            text=True).stdout.strip() == "PONG":
            return f"unix://{sock}"
        time.sleep(0.05)
    raise BenchError("redis-server did not start")


def redis_commands(sock: Path) -> dict:
    """Commands the private redis-server processed, by command: proof the store was used,
    and how many round trips a request costs."""
    info = subprocess.run(["redis-cli", "-s", str(sock), "info", "commandstats"], capture_output=True,
                          text=True).stdout
    calls = {}
    for line in info.splitlines():  # cmdstat_evalsha:calls=123,usec=...
        if line.startswith("cmdstat_"):
            name, _, stats = line[len("cmdstat_"):].partition(":")
            calls[name] = int(stats.split(",")[0].split("=")[1])
    return calls


def left_in_redis(sock: Path, namespace: str = "tw:{t:bench}") -> dict:
    """What the run left behind in Redis once its requests ended (every one cut off at the
    end of a wrk run included): open leases, reservation records, gauges. All zero, or a
    reservation leaked."""
    def cli(*args: str) -> str:
        return subprocess.run(["redis-cli", "-s", str(sock), *args], capture_output=True, text=True).stdout

    time.sleep(1.0)   # settles of the last requests
    fields = cli("hkeys", namespace).split()
    return {"open_leases": int(cli("zcard", namespace + ":leases").strip() or 0),
            "reservation_records": sum(1 for f in fields if f.startswith("r:")),
            "gauges_held": sorted(f for f in fields if f.startswith("g:"))}


def write_examples_config(tmp: Path, backend_url: str, store_url: str | None) -> Path:
    """examples/gateway.yaml as shipped, with what a benchmark must change: the backend's
    address, the key store and decision log in the temp dir, and the plan's rate and spend
    limits out of reach (the run measures checking them, not refusing)."""
    raw = yaml.safe_load((REPO / "examples" / "gateway.yaml").read_text())
    raw["upstreams"]["local"]["base_url"] = backend_url + "/v1"
    raw["logging"]["decisions"] = str(tmp / "decisions.jsonl")
    raw["keystore"]["url"] = f"sqlite:///{tmp / 'keys.db'}"
    if store_url is not None:
        raw["store"]["url"] = store_url
    plan = raw["plans"][raw["tenants"][EXAMPLES_TENANT]["plan"]]
    plan.update(tokens_per_minute=10**12, requests_per_minute=10**9, max_concurrent_streams=100_000,
                daily_spend_usd=10**9, monthly_spend_usd=10**10)
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def write_config(pipeline: str, tmp: Path, backend_url: str, store_url: str | None) -> Path:
    if pipeline == "examples":
        return write_examples_config(tmp, backend_url, store_url)
    raw = yaml.safe_load((BENCH_DIR / f"{pipeline}.yaml").read_text())
    raw["upstreams"]["bench"]["base_url"] = backend_url + "/v1"
    raw["logging"]["decisions"] = str(tmp / "decisions.jsonl")
    raw["keystore"]["url"] = f"sqlite:///{tmp / 'keys.db'}"
    if store_url is not None:
        raw["store"]["url"] = store_url
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def create_key(config: Path, tmp: Path, tenant: str = "bench") -> str:
    done = subprocess.run([PYTHON, "-m", "tokenward", "keys", "create", "--config", str(config), "--tenant", tenant,
                           "--name", "bench"], capture_output=True, text=True, timeout=60, cwd=tmp)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or len(lines) != 1:
        raise BenchError(f"`tokenward keys create` failed ({done.returncode}): {done.stdout} {done.stderr[-1500:]}")
    return lines[0].strip()


def start_gateway(procs: Procs, config: Path, stages: str | None, without: str | None,
                  workers: int = 1) -> tuple[Proc, str]:
    env = dict(os.environ)
    env.pop("BENCH_STAGES", None)
    env["BENCH_WITHOUT"] = without or ""
    if stages is not None:
        env["BENCH_STAGES"] = stages
    proc = procs.start("gateway", [PYTHON, str(BENCH_DIR / "gateway_launcher.py"), "serve", "--config", str(config),
                                   "--port", "0", "--workers", str(workers)],
                       GATEWAY_CPU if workers == 1 else "0,1", env)
    port = proc.wait_line(r"tokenward listening on http://127\.0\.0\.1:(\d+)").group(1)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # the port is bound before start-up completes
        try:
            import urllib.request

            with urllib.request.urlopen(url + "/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return proc, url
        except OSError:
            pass
        time.sleep(0.05)
    raise BenchError(f"gateway never became ready:\n{proc.err_path.read_text()[-3000:]}")


def probe(gateway_url: str, api_key: str | None, config: Path, tmp: Path, model: str = "bench-chat") -> str | None:
    """One request must get through; an identity stage that wants a key gets one."""
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    body_sent = (SMALL_BODY % model).encode()
    status, body = http_post(gateway_url + CHAT, body_sent, headers)
    if status == 401 and api_key is None:
        api_key = create_key(config, tmp)
        status, body = http_post(gateway_url + CHAT, body_sent, {"authorization": f"Bearer {api_key}"})
    if status != 200:
        raise BenchError(f"probe through the gateway got {status}: {body[:500]!r}")
    return api_key


def backend_posts(backend_url: str, settle_s: float = 10.0) -> int:
    """The completions the benchmark backend has answered (its own counter), once it has
    stopped moving: a proxy may still be forwarding requests its client gave up on."""
    def read() -> int:
        with urllib.request.urlopen(backend_url + "/_bench/stats", timeout=5) as resp:
            return int(json.loads(resp.read())["posts"])

    deadline = time.monotonic() + settle_s
    last = read()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = read()
        if now == last:
            return now
        last = now
    return last


def wrk_side(url: str, conns: int, duration: float, env: dict | None, backend: Proc, proxy: Proc,
             through_proxy: bool, path: str = CHAT, backend_url: str | None = None) -> dict:
    """One wrk run, with each process's share of its CPU and other people's load beside it.
    With ``backend_url``, the backend's own counter must have moved by the requests wrk saw
    answered (and at most ``conns`` more: requests cut off when wrk stopped): proof the
    path proxied every one."""
    posts0 = backend_posts(backend_url) if backend_url else None
    cpu = {"backend": backend.cpu_seconds(), "gateway": proxy.cpu_seconds()}
    user0, sys0 = proxy.cpu_times()
    busy0 = cpu_busy()
    result = run_wrk(url + path, conns, duration, env)
    seconds = result["duration_us"] / 1e6
    user1, sys1 = proxy.cpu_times()
    result["gateway_user_sys_s"] = (user1 - user0, sys1 - sys0)
    result["cpu_util"] = {name: (p.cpu_seconds() - cpu[name]) / seconds
                          for name, p in (("backend", backend), ("gateway", proxy))}
    result["cpu_util"]["wrk"] = result["wrk_cpu_s"] / seconds
    result["foreign_util"] = foreign_load(busy0, cpu_busy(), seconds, result["cpu_util"])
    result["gateway_cpu_us_per_request"] = (result["cpu_util"]["gateway"] * seconds * 1e6
                                            / max(result["requests"], 1)) if through_proxy else None
    if posts0 is not None:
        result["backend_posts"] = backend_posts(backend_url) - posts0
        if not result["requests"] <= result["backend_posts"] <= result["requests"] + conns or result["errors"]:
            raise BenchError(f"{url}: wrk saw {result['requests']} answered ({result['errors']} errors), "
                             f"the backend {result['backend_posts']}: not every request was proxied")
    return result


def wrk_pair(direct_url: str, gateway_url: str, conns: int, duration: float, api_key: str | None,
             backend: Proc, gateway: Proc) -> dict:
    out = {"direct": wrk_side(direct_url, conns, duration, None, backend, gateway, False),
           "gateway": wrk_side(gateway_url, conns, duration, {"BENCH_API_KEY": api_key or ""}, backend, gateway,
                               True)}
    out["added_p50_us"] = out["gateway"]["p50_us"] - out["direct"]["p50_us"]
    out["added_p99_us"] = out["gateway"]["p99_us"] - out["direct"]["p99_us"]
    return out


def reference_proxy(procs: Procs, backend: Proc, backend_url: str, args, client: str = "lean",
                    env: dict | None = None) -> dict:
    """The floor on this machine now: a minimal pass-through proxy with the gateway's own
    server and client (tokenward.http.serving, UpstreamPool; ``--reference-server uvicorn``
    for uvicorn+uvloop+httptools instead), same CPU, same load. With ``client="lean-budget"``
    it also counts, reserves, settles and records (bench/lean_budget.py)."""
    proc = procs.start("reference", [PYTHON, str(BENCH_DIR / "candidate_proxy.py"), "--server", args.reference_server,
                                     "--client", client, "--upstream", backend_url], GATEWAY_CPU,
                       {**os.environ, **env} if env else None)
    out: dict = {}
    try:
        url = "http://127.0.0.1:" + proc.wait_line(r"proxy listening on http://127\.0\.0\.1:(\d+)").group(1)
        status, body = post_when_up(url + CHAT, PROBE_BODY)
        if status != 200:
            raise BenchError(f"reference proxy answered {status}: {body[:300]!r}")
        if args.conns:
            run_wrk(url + CHAT, max(args.conns), 1)
            out["nonstream"] = {c: wrk_side(url, c, args.duration, None, backend, proc, True) for c in args.conns}
        if args.streams:
            before = proc.cpu_seconds()
            stream = run_streams(url, args.streams, max(1, int(args.duration * args.rate)), args.rate, None)
            stream["proxy_cpu_us_per_chunk"] = (proc.cpu_seconds() - before) * 1e6 / max(stream["chunks_received"], 1)
            stream["proxy_cpu_util"] = (proc.cpu_seconds() - before) / stream["wall_s"]
            out["stream"] = stream
        return out
    finally:
        proc.stop()
        procs.procs.remove(proc)


def nginx_hop(procs: Procs, tmp: Path, backend: Proc, backend_url: str, args) -> dict:
    """A plain nginx hop on the gateway's CPU, same backend, same load (bench/nginx_ref.py)."""
    proc, url = start_nginx(procs, tmp, backend_url)
    try:
        run_wrk(url + CHAT, max(args.conns), 1)
        return {c: wrk_side(url, c, args.duration, None, backend, proc, True) for c in args.conns}
    finally:
        proc.stop()
        procs.procs.remove(proc)


def foreign_load(before: dict, after: dict, seconds: float, ours: dict) -> dict:
    """Share of each CPU used by anything but this benchmark's processes (other people's work)."""
    used = {cpu: (after[cpu] - before[cpu]) / seconds for cpu in before}
    return {"cpu0": max(0.0, used.get("cpu0", 0) - ours["gateway"]),
            "cpu1": max(0.0, used.get("cpu1", 0) - ours["backend"] - ours["wrk"])}


def run_streams(url: str, streams: int, chunks: int, rate: float, api_key: str | None) -> dict:
    argv = pinned(LOAD_CPU, [PYTHON, str(BENCH_DIR / "stream_client.py"), "--url", url + CHAT,
                             "--streams", str(streams), "--chunks", str(chunks), "--rate", str(rate)])
    if api_key:
        argv += ["--api-key", api_key]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=chunks / rate + 60)
    for line in done.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            return json.loads(line[len("BENCH_JSON "):])
    raise BenchError(f"stream client failed ({done.returncode}): {done.stderr[-2000:]}")


def stream_pair(direct_url: str, gateway_url: str, args, api_key: str | None, backend: Proc,
                gateway: Proc) -> dict:
    chunks = max(1, int(args.duration * args.rate))
    out: dict = {}
    for side, url in (("direct", direct_url), ("gateway", gateway_url)):
        gw0, be0, client0, busy0 = gateway.cpu_seconds(), backend.cpu_seconds(), children_cpu(), cpu_busy()
        result = run_streams(url, args.streams, chunks, args.rate, api_key if side == "gateway" else None)
        seconds = result["wall_s"]
        util = {"gateway": (gateway.cpu_seconds() - gw0) / seconds, "backend": (backend.cpu_seconds() - be0) / seconds,
                "wrk": (children_cpu() - client0) / seconds}  # "wrk": the stream client here
        result["cpu_util"] = util
        result["foreign_util"] = foreign_load(busy0, cpu_busy(), seconds, util)
        out[side] = result
    out["gateway_cpu_us_per_chunk"] = (out["gateway"]["cpu_util"]["gateway"] * out["gateway"]["wall_s"] * 1e6
                                       / max(out["gateway"]["chunks_received"], 1))
    out["gateway_cpu_util"] = out["gateway"]["cpu_util"]["gateway"]
    for q in ("p50", "p99"):
        out[f"added_delay_{q}_ms"] = out["gateway"]["delay_ms"][q] - out["direct"]["delay_ms"][q]
        out[f"added_gap_{q}_ms"] = out["gateway"]["gap_ms"][q] - out["direct"]["gap_ms"][q]
    return out


def summarize_records(path: Path) -> dict:
    """What the decision records say: how many, which stages ran, their mean cost."""
    time.sleep(0.3)  # records are flushed every 100 ms
    counts: dict[str, int] = {}
    stages: dict[str, list[float]] = {}
    stream_s: list[float] = []   # how long each stream took, end to end, in the gateway
    total = 0
    for line in path.read_text().splitlines() if path.exists() else ():
        record = json.loads(line)
        total += 1
        if record.get("stream"):
            stream_s.append(record.get("duration_us", 0.0) / 1e6)
        key = f"{record.get('status')} {record.get('reason') or 'ok'}"
        counts[key] = counts.get(key, 0) + 1
        if record.get("status") == 200 and not record.get("stream"):
            for name, us in (record.get("stages_us") or {}).items():
                stages.setdefault(name, []).append(us)
    stream_s.sort()
    durations = ({"p50": stream_s[len(stream_s) // 2], "max": stream_s[-1]} if stream_s else None)
    return {"records": total, "by_status": counts, "stages_ran": list(stages),
            "stage_mean_us": {name: sum(v) / len(v) for name, v in stages.items()},
            "stream_duration_s": durations}


def rss_mib(pid: int) -> float:
    """Resident memory of a process (VmRSS), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def workloads(args) -> list[tuple[str, int]]:
    """What the side-by-side rows send: ("small", 0), ("sessions", N), ("new64k", 0)."""
    out = [("small", 0)] if args.small else []
    out += [("sessions", n) for n in args.sessions]
    return out + ([("new64k", 0)] if args.new_64k else [])


def workload_env(kind: str, sessions: int, model: str, pools: Path, stamp: str) -> dict:
    """post.lua's variables for a workload (bench/agent_texts.py writes the pools)."""
    if kind == "small":
        return {"BENCH_BODY": SMALL_BODY % model}
    return {"BENCH_AGENT_POOL": str(pools), "BENCH_SESSIONS": str(sessions if kind == "sessions" else 0),
            "BENCH_MODEL": model, "BENCH_STAMP": stamp}


def side_by_side(args, procs: Procs, tmp: Path, backend: Proc, backend_url: str, gateway: Proc,
                 gateway_url: str, api_key: str | None, model: str) -> dict:
    """Each workload through each path (the gateway, TensorZero, the nginx hop), one path at a
    time on CPU 0, ``--repeat`` rounds with the paths taken in turn; each path is warmed up
    first (``--warmup`` seconds: connections open, the gateway's memos hold what the
    workload repeats) and every measured run is checked against the backend's counter."""
    paths = [("tokenward", gateway, gateway_url, CHAT, model, api_key)]
    if args.tensorzero:
        proc, chat_url = start_tensorzero(procs, tmp, backend_url)
        base, _, tail = chat_url.rpartition("/chat/")
        paths.append((f"tensorzero {TENSORZERO_VERSION}", proc, base, "/chat/" + tail, TENSORZERO_MODEL, None))
    if args.nginx:
        proc, url = start_nginx(procs, tmp, backend_url)
        paths.append(("nginx hop", proc, url, CHAT, model, None))
    pools = write_pools(tmp / "pools")
    out: dict = {}
    for kind, sessions in workloads(args):
        name = f"{kind} {sessions}" if kind == "sessions" else kind
        rows: dict = {path[0]: {"runs": []} for path in paths}
        for label, proc, url, path, path_model, key in paths:
            env = {**workload_env(kind, sessions, path_model, pools, f"w{time.time_ns()}"), "BENCH_API_KEY": key or ""}
            warm = run_wrk(url + path, max(args.conns), args.warmup, env)
            if warm["errors"]:
                raise BenchError(f"{label}, {name}: {warm['errors']} errors while warming up")
        for _ in range(args.repeat):
            for label, proc, url, path, path_model, key in paths:
                env = {**workload_env(kind, sessions, path_model, pools, f"r{time.time_ns()}"),
                       "BENCH_API_KEY": key or ""}
                run = wrk_side(url, max(args.conns), args.duration, env, backend, proc, True, path, backend_url)
                run["rss_mib"] = rss_mib(proc.pid)
                rows[label]["runs"].append(run)
        for row in rows.values():
            row["cpu_us_per_request"] = sorted(r["gateway_cpu_us_per_request"] for r in row["runs"])
            row["median_us"] = statistics.median(row["cpu_us_per_request"])
        out[name] = rows
    return out


def measure(args, procs: Procs, tmp: Path) -> dict:
    backend, backend_url = start_backend(procs, args.rate)
    redis = args.pipeline in ("full", "examples") and args.store == "redis"
    store_url = start_redis(procs, tmp) if redis else None
    config = write_config(args.pipeline, tmp, backend_url, store_url if redis else None)
    tenant = EXAMPLES_TENANT if args.pipeline == "examples" else "bench"
    api_key = create_key(config, tmp, tenant) if args.pipeline in ("full", "examples") else None
    model = EXAMPLES_MODEL if args.pipeline == "examples" else "bench-chat"
    gateway, gateway_url = start_gateway(procs, config, args.stages, args.without, args.workers)
    api_key = probe(gateway_url, api_key, config, tmp, model)
    results: dict = {"pipeline": args.pipeline, "stages_requested": args.stages or "all registered",
                     "switched_off": args.without,
                     "api_key_used": api_key is not None, "duration_s": args.duration}
    if workloads(args):
        results["side_by_side"] = side_by_side(args, procs, tmp, backend, backend_url, gateway, gateway_url,
                                               api_key, model)
        results["decision_records"] = summarize_records(tmp / "decisions.jsonl")
        return results
    if args.conns:
        results["warmup"] = run_wrk(gateway_url + CHAT, max(args.conns), 2, {"BENCH_API_KEY": api_key or ""})
    for conns in args.conns:
        results[f"c{conns}"] = wrk_pair(backend_url, gateway_url, conns, args.duration, api_key, backend, gateway)
    if args.reference and store_url is None:
        results["reference"] = reference_proxy(procs, backend, backend_url, args)
        results["reference_server"] = args.reference_server
    if args.nginx:
        results["nginx"] = nginx_hop(procs, tmp, backend, backend_url, args)
    if args.streams:
        results["stream"] = stream_pair(backend_url, gateway_url, args, api_key, backend, gateway)
    results["decision_records"] = summarize_records(tmp / "decisions.jsonl")
    if store_url is not None:
        results["redis_commands"] = redis_commands(tmp / "redis.sock")
        results["left_in_redis"] = left_in_redis(tmp / "redis.sock")
        if args.reference:   # after the gateway's Redis figures, which it would blur
            env = {"BENCH_STORE_URL": store_url, "BENCH_RECORD_PATH": str(tmp / "lean-records.jsonl")}
            results["reference"] = reference_proxy(procs, backend, backend_url, args, "lean-budget", env)
            results["reference_server"] = args.reference_server
            results["reference_kind"] = "lean-budget"
            results["reference_left_in_redis"] = left_in_redis(tmp / "redis.sock")
    if args.profile:
        if args.profile_phase == "stream":
            chunks = max(1, int(args.duration * args.rate))
            load = lambda: run_streams(gateway_url, args.streams or 1000, chunks, args.rate, api_key)  # noqa: E731
        else:
            load = lambda: run_wrk(gateway_url + CHAT, max(args.conns or [32]), args.duration,  # noqa: E731
                                   {"BENCH_API_KEY": api_key or ""})
        results["profile"] = profile_during(gateway.pid, Path(args.profile), args.duration, load)
    return results


def report_side_by_side(results: dict) -> list[str]:
    lines = [f"{'workload':<14}{'path':<20}{'req/s':>9}{'us/req (runs)':>28}{'median':>9}{'x nginx':>9}"
             f"{'x tz':>7}{'RSS MiB':>9}{'other0':>8}"]
    for workload, rows in results["side_by_side"].items():
        nginx = next((r["median_us"] for p, r in rows.items() if p.startswith("nginx")), None)
        tz = next((r["median_us"] for p, r in rows.items() if p.startswith("tensorzero")), None)
        for path, row in rows.items():
            runs = row["runs"]
            lines.append(f"{workload:<14}{path:<20}{statistics.median(r['rps'] for r in runs):>9.0f}"
                         f"{', '.join(f'{u:.1f}' for u in row['cpu_us_per_request']):>28}{row['median_us']:>9.1f}"
                         f"{row['median_us'] / nginx if nginx else float('nan'):>9.2f}"
                         f"{row['median_us'] / tz if tz else float('nan'):>7.2f}{runs[-1]['rss_mib']:>9.1f}"
                         f"{max(r['foreign_util']['cpu0'] for r in runs):>8.2f}")
    lines.append("every run checked: the backend's own counter moved by the requests wrk saw answered (0 errors)")
    return lines


def report(results: dict) -> str:
    head = (f"pipeline: {results['pipeline']}  (stages that ran: "
            f"{', '.join(results['decision_records']['stages_ran'])}; api key: {results['api_key_used']})")
    if "side_by_side" in results:
        return "\n".join([head, *report_side_by_side(results),
                          f"decision records: {results['decision_records']['records']} "
                          f"{results['decision_records']['by_status']}"])
    lines = [head,
             f"{'run':<12}{'req/s':>10}{'errors':>8}{'p50 ms':>9}{'p99 ms':>9}"
             f"{'gw us/req':>11}{'cpu0':>6}{'cpu1':>6}{'other0':>8}{'other1':>8}"]
    for key in [k for k in results if k.startswith("c") and k[1:].isdigit()]:
        pair = results[key]
        for side in ("direct", "gateway"):
            r = pair[side]
            per_req = f"{r['gateway_cpu_us_per_request']:.1f}" if r["gateway_cpu_us_per_request"] else "-"
            cpu1 = r["cpu_util"]["backend"] + r["cpu_util"]["wrk"]
            lines.append(f"{key + ' ' + side:<12}{r['rps']:>10.0f}{r['errors']:>8}{r['p50_us'] / 1000:>9.3f}"
                         f"{r['p99_us'] / 1000:>9.3f}{per_req:>11}{r['cpu_util']['gateway']:>6.2f}{cpu1:>6.2f}"
                         f"{r['foreign_util']['cpu0']:>8.2f}{r['foreign_util']['cpu1']:>8.2f}")
        lines.append(f"{key} added p50 {pair['added_p50_us'] / 1000:.3f} ms, added p99 "
                     f"{pair['added_p99_us'] / 1000:.3f} ms")
    for conns, ref in results.get("reference", {}).get("nonstream", {}).items():
        lines.append(f"{'ref c' + str(conns):<12}{ref['rps']:>10.0f}{ref['errors']:>8}{ref['p50_us'] / 1000:>9.3f}"
                     f"{ref['p99_us'] / 1000:>9.3f}{ref['gateway_cpu_us_per_request']:>11.1f}"
                     f"{ref['cpu_util']['gateway']:>6.2f}{ref['cpu_util']['backend'] + ref['cpu_util']['wrk']:>6.2f}"
                     f"{ref['foreign_util']['cpu0']:>8.2f}{ref['foreign_util']['cpu1']:>8.2f}"
                     + ("   (lean pass-through + tiktoken count + reserve/settle EVALSHA + record: issue 5's reference)"
                        if results.get("reference_kind") == "lean-budget" else
                        f"   (minimal {results['reference_server']}+UpstreamPool pass-through, no pipeline)"))
    for conns, ref in results.get("nginx", {}).items():
        lines.append(f"{'nginx c' + str(conns):<12}{ref['rps']:>10.0f}{ref['errors']:>8}{ref['p50_us'] / 1000:>9.3f}"
                     f"{ref['p99_us'] / 1000:>9.3f}{ref['gateway_cpu_us_per_request']:>11.1f}"
                     f"{ref['cpu_util']['gateway']:>6.2f}{ref['cpu_util']['backend'] + ref['cpu_util']['wrk']:>6.2f}"
                     f"{ref['foreign_util']['cpu0']:>8.2f}{ref['foreign_util']['cpu1']:>8.2f}   (plain nginx hop)")
    stream = results.get("stream")
    if stream:
        for side in ("direct", "gateway"):
            s = stream[side]
            lines.append(f"stream {side:<8} {s['complete']}/{s['streams']} complete, stalled {s['stalled']}, "
                         f"failed {s['failed']}, chunks {s['chunks_received']}/{s['chunks_expected']}, "
                         f"delay p50/p99/max {s['delay_ms']['p50']:.2f}/{s['delay_ms']['p99']:.2f}/"
                         f"{s['delay_ms']['max']:.1f} ms, gap p99/max {s['gap_ms']['p99']:.2f}/"
                         f"{s['gap_ms']['max']:.1f} ms, first chunk p50/max {s['first_chunk_ms']['p50']:.0f}/"
                         f"{s['first_chunk_ms']['max']:.0f} ms, wall {s['wall_s']:.1f} s; "
                         f"other load cpu0/cpu1 {s['foreign_util']['cpu0']:.2f}/{s['foreign_util']['cpu1']:.2f}")
        ref_stream = results.get("reference", {}).get("stream")
        if ref_stream:
            s = ref_stream
            lines.append(f"stream reference {s['complete']}/{s['streams']} complete, stalled {s['stalled']}, "
                         f"delay p50/p99/max {s['delay_ms']['p50']:.2f}/{s['delay_ms']['p99']:.2f}/"
                         f"{s['delay_ms']['max']:.1f} ms, gap p99/max {s['gap_ms']['p99']:.2f}/{s['gap_ms']['max']:.1f}"
                         f" ms; {s['proxy_cpu_us_per_chunk']:.1f} us CPU per chunk ({s['proxy_cpu_util']:.0%} of CPU 0)"
                         f"  (minimal {results['reference_server']}+UpstreamPool relay)")
        lines.append(f"stream added delay p50 {stream['added_delay_p50_ms']:.2f} ms, p99 "
                     f"{stream['added_delay_p99_ms']:.2f} ms; added gap p99 {stream['added_gap_p99_ms']:.2f} ms; "
                     f"gateway {stream['gateway_cpu_us_per_chunk']:.1f} us CPU per chunk "
                     f"({stream['gateway_cpu_util']:.0%} of CPU 0)")
    if "redis_commands" in results:
        calls = results["redis_commands"]
        records = max(results["decision_records"]["records"], 1)
        lines.append(f"redis commands: {sum(calls.values())} ({sum(calls.values()) / records:.1f} per request): "
                     + ", ".join(f"{name} {n}" for name, n in sorted(calls.items(), key=lambda kv: -kv[1])))
        left = results["left_in_redis"]
        lines.append(f"left in redis after the run: {left['open_leases']} open leases, "
                     f"{left['reservation_records']} reservation records, gauges held: {left['gauges_held'] or 'none'}")
        if "reference_left_in_redis" in results:
            ref_left = results["reference_left_in_redis"]
            lines.append(f"left in redis after the lean reference: {ref_left['open_leases']} open leases, "
                         f"{ref_left['reservation_records']} reservation records")
    lines.append(f"decision records: {results['decision_records']['records']} "
                 f"{results['decision_records']['by_status']}")
    durations = results["decision_records"].get("stream_duration_s")
    if durations:
        lines.append(f"streams in the gateway, start to end: p50 {durations['p50']:.2f} s, max {durations['max']:.2f} s")
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="gateway overhead: through the gateway vs direct, same run")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run (and per stream)")
    parser.add_argument("--pipeline", choices=("foundation", "full", "examples"), default="foundation",
                        help="examples: examples/gateway.yaml as shipped (tenant acme, model small-chat), with the "
                        "plan's rate and spend limits raised out of reach")
    parser.add_argument("--tensorzero", action="store_true",
                        help=f"side by side: also TensorZero {TENSORZERO_VERSION}'s gateway (bench/tensorzero_ref.py)")
    parser.add_argument("--small", action="store_true",
                        help="side by side: the small chat body (with --tensorzero, the default workload)")
    parser.add_argument("--sessions", default="",
                        help="side by side: agents' sessions, comma-separated counts (2000,1): each session its "
                        "own 16 history messages of 4 KiB and a new 4 KB message per turn (bench/post.lua)")
    parser.add_argument("--new-64k", action="store_true",
                        help="side by side: one new, unique 64 KiB message per request")
    parser.add_argument("--repeat", type=int, default=1, help="side by side: rounds, paths taken in turn")
    parser.add_argument("--warmup", type=float, default=10.0, help="side by side: seconds of warm-up per path")
    parser.add_argument("--conns", default="32,8", help="wrk concurrencies, comma-separated (0: no wrk runs)")
    parser.add_argument("--streams", type=int, default=1000, help="concurrent SSE streams (0: skip)")
    parser.add_argument("--no-stream", action="store_true")
    parser.add_argument("--reference-server", choices=("tokenward", "uvicorn"), default="tokenward",
                        help="the minimal pass-through's HTTP server")
    parser.add_argument("--no-reference", dest="reference", action="store_false",
                        help="skip the minimal uvicorn+UpstreamPool pass-through run (the floor, same conditions)")
    parser.add_argument("--rate", type=float, default=20.0, help="chunks per second per stream")
    parser.add_argument("--stages", help="register only these pipeline slots, e.g. 'edge' for issue 2's "
                        "foundation pipeline (default: every registered stage)")
    parser.add_argument("--nice", type=int, default=0,
                        help="run every benchmark process at this nice value (e.g. -10, needs root) so other "
                        "people's work on a shared machine disturbs the run less; recorded with the results")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                        help="first wait up to S seconds for both CPUs to be idle (other people's work)")
    parser.add_argument("--without", help="experiment: switch parts of the gateway off (gateway_launcher.py's "
                        "BENCH_WITHOUT: watch, record, proxyheaders, gcfreeze, gc)")
    parser.add_argument("--nginx", action="store_true",
                        help="also measure a plain nginx hop in the same run, for scale (bench/nginx_ref.py)")
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--profile", help="also profile the gateway with py-spy; output dir")
    parser.add_argument("--store", choices=("redis", "memory"), default="redis",
                        help="--pipeline full: the budget store (memory: the in-process one)")
    parser.add_argument("--workers", type=int, default=1, help="gateway worker processes (more than 1: not pinned; needs --store redis)")
    parser.add_argument("--profile-phase", choices=("nonstream", "stream"), default="nonstream",
                        help="profile under wrk at the highest --conns, or under the streaming load")
    args = parser.parse_args()
    args.conns = [int(c) for c in args.conns.split(",") if c.strip() and int(c) > 0]  # "0": streaming only
    args.sessions = [int(n) for n in args.sessions.split(",") if n.strip()]
    if args.tensorzero and not (args.sessions or args.new_64k):
        args.small = True
    if (args.small or args.sessions or args.new_64k) and not args.conns:
        parser.error("the side-by-side workloads need a wrk concurrency (--conns 32)")
    if args.no_stream:
        args.streams = 0
    return args


def main() -> None:
    args = parse_args()
    require("wrk")
    require("taskset")
    raise_fd_limit()
    set_priority(args.nice)
    busiest = wait_quiet(args.wait_quiet) if args.wait_quiet else None
    info = machine()
    info["busiest_cpu_before_start"] = busiest
    info["nice"] = args.nice
    runs = len(args.conns) * 2 + 2 + (3 if args.streams else 0) + (1 if args.profile else 0)
    runs += len(workloads(args)) * 3 * (args.repeat + args.warmup / max(args.duration, 1))
    with tempfile.TemporaryDirectory(prefix="tokenward-bench-") as tmp_name:
        tmp = Path(tmp_name)
        with Procs(tmp, deadline_s=runs * (args.duration + 30) + 120) as procs:
            results = measure(args, procs, tmp)
    info["loadavg_end"] = os.getloadavg()
    results["machine"] = info
    print(report(results))
    if "profile" in results:
        print("\nprofile of the gateway (py-spy):\n" + results["profile"]["top"])
    print(f"load average at start {info['loadavg_start']}, at end {info['loadavg_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    run_main(main, "benchmark")
