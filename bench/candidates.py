"""Choose the HTTP server and the upstream client by measurement (issue 2, item 9).

    python bench/candidates.py [--duration 10] [--conns 32] [--json out.json] [--skip-backends]

1. Backends (each pinned to CPU 1, wrk on CPU 0, so only the backend is measured): the
   project's mock (``python -m tokenward.mock``) and bench/backend.py. The cheaper one is
   what the other benchmarks use, because it shares CPU 1 with the load generator.
2. Minimal pass-through proxies (bench/candidate_proxy.py) on CPU 0, backend and wrk on
   CPU 1, same wrk setup as overhead.py: uvicorn+uvloop+httptools with the aiohttp client,
   the httpx client and the project's lean client (tokenward.upstream.client.UpstreamPool);
   then aiohttp.web (on uvloop) with whichever client cost the least CPU per request,
   then the gateway's own server (tokenward.http.serving) alone and with that client.
   Direct-to-backend and uvicorn alone (no upstream) in the same run for reference.
   Reported: requests/s, errors, p50/p99, CPU per request, and other people's load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    BENCH_DIR, GATEWAY_CPU, LOAD_CPU, POST_LUA, PYTHON, BenchError, Procs, children_cpu, cpu_busy, machine, post_when_up,
    pinned, raise_fd_limit, require, run_wrk, set_priority, wait_quiet, run_main,
)

CHAT = "/v1/chat/completions"
BODY = b'{"model":"bench-chat","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}'
PROXIES = [("uvicorn", "aiohttp"), ("uvicorn", "httpx"), ("uvicorn", "lean")]


def wrk_on(cpu: str, url: str, conns: int, duration: float) -> dict:
    """Like harness.run_wrk, but wrk on ``cpu`` (to measure a backend alone)."""
    import re
    import subprocess

    argv = pinned(cpu, ["wrk", "-t1", f"-c{conns}", f"-d{duration:g}s", "--timeout", "5s",
                        "-s", str(POST_LUA), url])
    before = children_cpu()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 30)
    found = re.search(r"^BENCH_JSON (.*)$", done.stdout, re.M)
    if not found:
        raise BenchError(f"wrk failed: {done.stdout[-1000:]} {done.stderr[-1000:]}")
    result = json.loads(found.group(1))
    result["rps"] = result["requests"] / (result["duration_us"] / 1e6)
    result["errors"] = sum(result[k] for k in ("connect_errors", "read_errors", "write_errors", "status_errors",
                                               "timeout_errors"))
    result["wrk_cpu_s"] = children_cpu() - before
    return result


def measure_backends(procs: Procs, duration: float, conns: int) -> dict:
    candidates = {
        "tokenward mock (uvicorn)": [PYTHON, "-m", "tokenward.mock", "--port", "0"],
        "bench/backend.py (raw asyncio + httptools)": [PYTHON, str(BENCH_DIR / "backend.py"), "--port", "0"],
    }
    out = {}
    for name, argv in candidates.items():
        proc = procs.start(f"backend-{len(out)}", argv, LOAD_CPU)
        port = proc.wait_line(r"listening on http://127\.0\.0\.1:(\d+)").group(1)
        url = f"http://127.0.0.1:{port}{CHAT}"
        status, body = post_when_up(url, BODY)
        if status != 200:
            raise BenchError(f"{name} answered {status}: {body[:300]!r}")
        wrk_on(GATEWAY_CPU, url, conns, 1)
        before = proc.cpu_seconds()
        result = wrk_on(GATEWAY_CPU, url, conns, duration)
        result["cpu_us_per_request"] = (proc.cpu_seconds() - before) * 1e6 / max(result["requests"], 1)
        out[name] = result
        proc.stop()
        procs.procs.remove(proc)
    return out


def measure_proxy(procs: Procs, server: str, client: str, backend_url: str, duration: float, conns: int,
                  backend=None) -> dict:
    proc = procs.start(f"proxy-{server}-{client}", [PYTHON, str(BENCH_DIR / "candidate_proxy.py"), "--server", server,
                                                     "--client", client, "--upstream", backend_url], GATEWAY_CPU)
    try:
        port = proc.wait_line(r"proxy listening on http://127\.0\.0\.1:(\d+)").group(1)
        url = f"http://127.0.0.1:{port}{CHAT}"
        status, body = post_when_up(url, BODY)
        if status != 200:
            raise BenchError(f"{server}+{client} answered {status}: {body[:300]!r}")
        run_wrk(url, conns, 1)
        before, busy0 = proc.cpu_seconds(), cpu_busy()
        backend0 = backend.cpu_seconds() if backend is not None else 0.0
        result = run_wrk(url, conns, duration)
        seconds = result["duration_us"] / 1e6
        used = proc.cpu_seconds() - before
        result["cpu_us_per_request"] = used * 1e6 / max(result["requests"], 1)
        result["cpu0_util"] = used / seconds
        busy = {cpu: (t - busy0[cpu]) / seconds for cpu, t in cpu_busy().items()}
        backend_util = (backend.cpu_seconds() - backend0) / seconds if backend is not None else 0.0
        result["foreign_util"] = {"cpu0": max(0.0, busy["cpu0"] - used / seconds),
                                  "cpu1": max(0.0, busy["cpu1"] - backend_util - result["wrk_cpu_s"] / seconds)}
        return result
    finally:
        proc.stop()
        procs.procs.remove(proc)


def measure_proxies(procs: Procs, duration: float, conns: int) -> dict:
    backend = procs.start("backend", [PYTHON, str(BENCH_DIR / "backend.py"), "--port", "0"], LOAD_CPU)
    backend_url = "http://127.0.0.1:" + backend.wait_line(r"listening on http://127\.0\.0\.1:(\d+)").group(1)
    out = {"direct": run_wrk(backend_url + CHAT, conns, duration)}
    # The server alone, answering a fixed body: calibrates this machine against the
    # figures in libraries.md (uvicorn+uvloop+httptools ~23 us of CPU per request there).
    out["uvicorn alone (no upstream)"] = measure_proxy(procs, "uvicorn", "none", backend_url, duration, conns,
                                                         backend)
    for server, client in PROXIES:
        out[f"{server}+{client}"] = measure_proxy(procs, server, client, backend_url, duration, conns, backend)
    # Lowest CPU per request, not highest req/s: on a shared machine req/s follows whoever
    # else is running, CPU per request much less so.
    best = min(PROXIES, key=lambda sc: out[f"{sc[0]}+{sc[1]}"]["cpu_us_per_request"])[1]
    out["best_client"] = best
    out[f"aiohttp.web+{best}"] = measure_proxy(procs, "aiohttp", best, backend_url, duration, conns, backend)
    # The gateway's own server (tokenward.http.serving), alone and with the best client.
    out["tokenward server alone (no upstream)"] = measure_proxy(procs, "tokenward", "none", backend_url, duration,
                                                                  conns, backend)
    out[f"tokenward+{best}"] = measure_proxy(procs, "tokenward", best, backend_url, duration, conns, backend)
    return out


def report(results: dict) -> str:
    lines = []
    backends = results.get("backends")
    if backends:
        lines += ["backends alone (backend on CPU 1, wrk on CPU 0):",
                  f"  {'backend':<46}{'req/s':>9}{'p50 ms':>8}{'p99 ms':>8}{'CPU us/req':>12}"]
        for name, r in backends.items():
            lines.append(f"  {name:<46}{r['rps']:>9.0f}{r['p50_us'] / 1000:>8.3f}{r['p99_us'] / 1000:>8.3f}"
                         f"{r['cpu_us_per_request']:>12.1f}")
    proxies = results["proxies"]
    lines += [f"pass-through proxies on CPU 0 (c={results['conns']}, backend + wrk on CPU 1):",
              f"  {'candidate':<28}{'req/s':>9}{'errors':>8}{'p50 ms':>8}{'p99 ms':>8}{'CPU us/req':>12}"
              f"{'cpu0':>6}{'other0':>8}{'other1':>8}"]
    for name, r in proxies.items():
        if name == "best_client":
            continue
        cpu = f"{r['cpu_us_per_request']:.1f}" if "cpu_us_per_request" in r else "-"
        util = f"{r['cpu0_util']:>6.2f}{r['foreign_util']['cpu0']:>8.2f}{r['foreign_util']['cpu1']:>8.2f}" \
            if "foreign_util" in r else ""
        lines.append(f"  {name:<28}{r['rps']:>9.0f}{r['errors']:>8}{r['p50_us'] / 1000:>8.3f}"
                     f"{r['p99_us'] / 1000:>8.3f}{cpu:>12}{util}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="server / client / backend candidates, measured")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--conns", type=int, default=32)
    parser.add_argument("--skip-backends", action="store_true")
    parser.add_argument("--nice", type=int, default=0,
                        help="run every benchmark process at this nice value (e.g. -10, needs root) so other "
                        "people's work on a shared machine disturbs the run less; recorded with the results")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                        help="first wait up to S seconds for both CPUs to be idle (other people's work)")
    parser.add_argument("--json")
    args = parser.parse_args()
    require("wrk")
    raise_fd_limit()
    set_priority(args.nice)
    busiest = wait_quiet(args.wait_quiet) if args.wait_quiet else None
    info = machine()
    info["busiest_cpu_before_start"] = busiest
    info["nice"] = args.nice
    results: dict = {"conns": args.conns, "duration_s": args.duration}
    with tempfile.TemporaryDirectory(prefix="tokenward-cand-") as tmp_name:
        with Procs(Path(tmp_name), deadline_s=12 * (args.duration + 20) + 60) as procs:
            if not args.skip_backends:
                results["backends"] = measure_backends(procs, args.duration, args.conns)
            results["proxies"] = measure_proxies(procs, args.duration, args.conns)
    info["loadavg_end"] = os.getloadavg()
    results["machine"] = info
    print(report(results))
    print(f"load average at start {info['loadavg_start']}, at end {info['loadavg_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    run_main(main, "candidates")
