"""Two versions of the gateway against each other, in the server, under the same load:
both run at once on CPU 0 (backend, Redis and wrk on CPU 1) and wrk alternates between
them in short rounds, so the host's slow and fast phases hit both alike.

    python bench/ab.py A_SRC B_SRC [--pipeline full] [--rounds 8] [--duration 3]
                       [--store redis|memory] [--a-with F] [--b-with F] [--prompt-bytes N] [--unique]

A_SRC and B_SRC are source directories put first on PYTHONPATH (e.g. the ``src`` of a
``git worktree`` at another commit). Reported: each round's CPU per request for both and
their ratio, then the median ratio. A ratio is what to read: on this shared VM a single
run moves by 10-25%, the ratio of neighbouring rounds by a few percent.

The same code with a feature on in one of them prices the feature (A_SRC = B_SRC = src):
``--b-with screening`` (the ``standard`` policy: heuristic injection, PII tokenize),
``--b-with cache`` (the response cache on; wrk's identical requests are hits after the
first: a hit against a forwarded request), ``--b-with cache --unique`` (every request
different: the miss path against the cache off). ``--prompt-bytes`` sets the prompt's size;
``--stream-tokens N`` asks for a stream of N tokens (a hit is replayed as a few events, a
forwarded stream relays N chunks).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml  # noqa: E402

from harness import (  # noqa: E402
    BENCH_DIR, GATEWAY_CPU, PYTHON, BenchError, Procs, post_when_up, raise_fd_limit, require, run_main, run_wrk,
)
from agent_texts import write_pools  # noqa: E402
from overhead import (  # noqa: E402
    CHAT, EXAMPLES_MODEL, EXAMPLES_TENANT, create_key, probe, start_backend, start_redis, workload_env, write_config,
)


FEATURES = ("screening", "cache")


def _with(raw: dict, features: str, cache_entries: int = 100_000) -> None:
    """Switch features on in a config (``screening``, ``cache``, ``screening+cache``)."""
    for feature in filter(None, features.split("+")):
        if feature not in FEATURES:
            raise BenchError(f"unknown feature {feature!r} (known: {', '.join(FEATURES)})")
        for plan in raw["plans"].values():
            if feature == "screening":
                raw["screening"] = {"policies": {"standard": {
                    "injection": {"detector": "heuristic"}, "pii": {"detector": "patterns", "mode": "tokenize"}}}}
                plan["screening"] = "standard"
            else:
                raw["cache"] = {"store": "memory", "max_entries": cache_entries}
                plan["cache"] = True


def _ready(url: str) -> bool:
    """GET /readyz answered 200 (a POST is route_denied since the routing table of issue 38)."""
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        time.sleep(0.05)
        return False


def _gateway(procs: Procs, name: str, src: Path, config: Path, stages: str | None, features: str = "",
             cache_entries: int = 100_000):
    """A gateway with ``src`` first on its path and a config (and decision log) of its own."""
    raw = yaml.safe_load(config.read_text())
    raw["logging"]["decisions"] = str(config.parent / f"decisions-{name}.jsonl")
    _with(raw, features, cache_entries)
    own = config.parent / f"gateway-{name}.yaml"
    own.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(src.resolve()), "BENCH_WITHOUT": ""}
    if stages is not None:
        env["BENCH_STAGES"] = stages
    proc = procs.start(f"gateway-{name}", [PYTHON, str(BENCH_DIR / "gateway_launcher.py"), "serve", "--config",
                                           str(own), "--port", "0"], GATEWAY_CPU, env)
    url = "http://127.0.0.1:" + proc.wait_line(r"tokenward listening on http://127\.0\.0\.1:(\d+)").group(1)
    deadline = time.monotonic() + 60   # examples/gateway.yaml's screening tables take seconds to build
    while not _ready(url):   # bound before start-up completes
        if time.monotonic() > deadline:
            raise BenchError(f"gateway {name} never became ready:\n{proc.err_path.read_text()[-3000:]}")
        time.sleep(0.05)
    return proc, url


def _ready(url: str) -> bool:
    """GET /readyz answers 200 (the routing table gives only GET to readiness: a POST is the pipeline's)."""
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def _round(proc, url: str, conns: int, duration: float, api_key: str | None, body: dict | None = None) -> dict:
    env = {"BENCH_API_KEY": api_key or "", **(body or {})}
    if "BENCH_STAMP" in env:   # agents' workloads: this round's new messages are its own
        env["BENCH_STAMP"] = f"{env['BENCH_STAMP']}-{time.time_ns()}"
    before = proc.cpu_seconds()
    result = run_wrk(url + CHAT, conns, duration, env)
    used = proc.cpu_seconds() - before
    return {"rps": result["rps"], "errors": result["errors"], "p50_us": result["p50_us"],
            "cpu_us_per_request": used * 1e6 / max(result["requests"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--pipeline", choices=("foundation", "full", "examples"), default="full",
                        help="examples: examples/gateway.yaml as shipped (bench/overhead.py --pipeline examples)")
    parser.add_argument("--sessions", type=int, default=0,
                        help="agents' sessions (bench/post.lua): N sessions, each its own 16 history messages "
                        "of 4 KiB and a new 4 KB message a turn")
    parser.add_argument("--new-64k", action="store_true", help="one new, unique 64 KiB message per request")
    parser.add_argument("--warmup", type=float, default=1.0,
                        help="seconds of warm-up per gateway (--sessions: long enough to send every session once)")
    parser.add_argument("--stages", help="register only these pipeline slots")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--conns", type=int, default=32)
    parser.add_argument("--store", choices=("redis", "memory"), default="redis", help="full pipeline's store")
    parser.add_argument("--a-with", default="", help="features on in A: screening, cache, screening+cache")
    parser.add_argument("--b-with", default="", help="features on in B")
    parser.add_argument("--prompt-bytes", type=int, default=0, help="the prompt's size (0: 'Say hello.')")
    parser.add_argument("--unique", action="store_true", help="every request different (a counter in the prompt)")
    parser.add_argument("--cache-entries", type=int, default=100_000,
                        help="the memory cache's max_entries (--unique fills it, then evicts)")
    parser.add_argument("--stream-tokens", type=int, default=0,
                        help="ask for a stream of this many tokens (the backend sends one chunk per token, fast)")
    parser.add_argument("--json")
    args = parser.parse_args()
    body = {}
    if args.prompt_bytes or args.stream_tokens:
        prose = "The quarterly report covers revenue, operating costs and the hiring plan for the next quarters. "
        prompt = (prose * (args.prompt_bytes // len(prose) + 1))[:args.prompt_bytes] if args.prompt_bytes \
            else "Say hello."
        request = {"model": "bench-chat", "max_tokens": args.stream_tokens or 16,
                   "messages": [{"role": "user", "content": prompt}]}
        if args.stream_tokens:
            request["stream"] = True
        body["BENCH_BODY"] = json.dumps(request, separators=(",", ":"))
    if args.unique:
        body["BENCH_UNIQUE"] = "1"
    require("wrk")
    raise_fd_limit()
    model = EXAMPLES_MODEL if args.pipeline == "examples" else "bench-chat"
    rows = []
    with tempfile.TemporaryDirectory(prefix="tokenward-ab-") as tmp_name:
        tmp = Path(tmp_name)
        with Procs(tmp, deadline_s=args.rounds * 2 * (args.duration + 5) + 2 * args.warmup + 180) as procs:
            # streams: one chunk per token as fast as the backend's timer allows, so a stream
            # costs its relay's CPU rather than waiting
            _, backend_url = start_backend(procs, 20000.0 if args.stream_tokens else 20.0)
            store_url = start_redis(procs, tmp) if args.pipeline == "full" and args.store == "redis" else None
            config = write_config(args.pipeline, tmp, backend_url, store_url)
            if args.sessions or args.new_64k:
                kind = "sessions" if args.sessions else "new64k"
                body = workload_env(kind, args.sessions, model, write_pools(tmp / "pools"), "ab")
            elif args.pipeline == "examples" and "BENCH_BODY" not in body:
                body.update(workload_env("small", 0, model, tmp, "ab"))   # the small body, for its model
            (proc_a, url_a), (proc_b, url_b) = (_gateway(procs, n, s, config, args.stages, w, args.cache_entries)
                                                    for n, s, w in (("a", args.a, args.a_with),
                                                                    ("b", args.b, args.b_with)))
            key = create_key(config, tmp, EXAMPLES_TENANT) if args.pipeline == "examples" else None
            api_key = probe(url_a, key, config, tmp, model)
            probe(url_b, api_key, config, tmp, model)
            for proc, url in ((proc_a, url_a), (proc_b, url_b)):
                _round(proc, url, args.conns, args.warmup, api_key, body)       # warm
            for i in range(args.rounds):
                # A then B on even rounds, B then A on odd: neither always runs first
                order = ((proc_a, url_a), (proc_b, url_b)) if i % 2 == 0 else ((proc_b, url_b), (proc_a, url_a))
                got = [_round(p, u, args.conns, args.duration, api_key, body) for p, u in order]
                a, b = got if i % 2 == 0 else got[::-1]
                if a["errors"] or b["errors"]:
                    raise BenchError(f"round {i}: errors A={a['errors']} B={b['errors']}")
                rows.append({"a": a, "b": b, "ratio": b["cpu_us_per_request"] / a["cpu_us_per_request"]})
                print(f"round {i}: A {a['rps']:7.0f} req/s {a['cpu_us_per_request']:6.1f} us   "
                      f"B {b['rps']:7.0f} req/s {b['cpu_us_per_request']:6.1f} us   B/A {rows[-1]['ratio']:.3f}",
                      flush=True)
    ratio = statistics.median(r["ratio"] for r in rows)
    med = {k: statistics.median(r[k]["cpu_us_per_request"] for r in rows) for k in ("a", "b")}
    rps = {k: statistics.median(r[k]["rps"] for r in rows) for k in ("a", "b")}
    print(f"median: A {rps['a']:.0f} req/s {med['a']:.1f} us/req, B {rps['b']:.0f} req/s {med['b']:.1f} us/req; "
          f"B/A CPU per request {ratio:.3f} (min {min(r['ratio'] for r in rows):.3f}, "
          f"max {max(r['ratio'] for r in rows):.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps({"a": str(args.a), "b": str(args.b), "pipeline": args.pipeline,
                                               "a_with": args.a_with, "b_with": args.b_with, "store": args.store,
                                               "prompt_bytes": args.prompt_bytes, "unique": args.unique,
                                               "stream_tokens": args.stream_tokens,
                                               "cache_entries": args.cache_entries,
                                               "sessions": args.sessions, "new_64k": args.new_64k,
                                               "rounds": rows, "median_ratio": ratio}, indent=2))


if __name__ == "__main__":
    run_main(main, "ab")
