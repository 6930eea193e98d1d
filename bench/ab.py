"""Two versions of the gateway against each other, in the server, under the same load:
both run at once on CPU 0 (backend, Redis and wrk on CPU 1) and wrk alternates between
them in short rounds, so the host's slow and fast phases hit both alike.

    python bench/ab.py A_SRC B_SRC [--pipeline full] [--rounds 8] [--duration 3]

A_SRC and B_SRC are source directories put first on PYTHONPATH (e.g. the ``src`` of a
``git worktree`` at another commit). Reported: each round's CPU per request for both and
their ratio, then the median ratio. A ratio is what to read: on this shared VM a single
run moves by 10-25%, the ratio of neighbouring rounds by a few percent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml  # noqa: E402

from harness import (  # noqa: E402
    BENCH_DIR, GATEWAY_CPU, PYTHON, BenchError, Procs, post_when_up, raise_fd_limit, require, run_main, run_wrk,
)
from overhead import CHAT, probe, start_backend, start_redis, write_config  # noqa: E402


def _gateway(procs: Procs, name: str, src: Path, config: Path, stages: str | None):
    """A gateway with ``src`` first on its path and a config (and decision log) of its own."""
    raw = yaml.safe_load(config.read_text())
    raw["logging"]["decisions"] = str(config.parent / f"decisions-{name}.jsonl")
    own = config.parent / f"gateway-{name}.yaml"
    own.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(src.resolve()), "BENCH_WITHOUT": ""}
    if stages is not None:
        env["BENCH_STAGES"] = stages
    proc = procs.start(f"gateway-{name}", [PYTHON, str(BENCH_DIR / "gateway_launcher.py"), "serve", "--config",
                                           str(own), "--port", "0"], GATEWAY_CPU, env)
    url = "http://127.0.0.1:" + proc.wait_line(r"tokenward listening on http://127\.0\.0\.1:(\d+)").group(1)
    deadline = time.monotonic() + 20
    while post_when_up(url + "/readyz", b"")[0] != 200:   # bound before start-up completes
        if time.monotonic() > deadline:
            raise BenchError(f"gateway {name} never became ready:\n{proc.err_path.read_text()[-3000:]}")
        time.sleep(0.05)
    return proc, url


def _round(proc, url: str, conns: int, duration: float, api_key: str | None) -> dict:
    env = {"BENCH_API_KEY": api_key or ""}
    before = proc.cpu_seconds()
    result = run_wrk(url + CHAT, conns, duration, env)
    used = proc.cpu_seconds() - before
    return {"rps": result["rps"], "errors": result["errors"], "p50_us": result["p50_us"],
            "cpu_us_per_request": used * 1e6 / max(result["requests"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--pipeline", choices=("foundation", "full"), default="full")
    parser.add_argument("--stages", help="register only these pipeline slots")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--conns", type=int, default=32)
    parser.add_argument("--json")
    args = parser.parse_args()
    require("wrk")
    raise_fd_limit()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tokenward-ab-") as tmp_name:
        tmp = Path(tmp_name)
        with Procs(tmp, deadline_s=args.rounds * 2 * (args.duration + 5) + 180) as procs:
            _, backend_url = start_backend(procs, 20.0)
            store_url = start_redis(procs, tmp) if args.pipeline == "full" else None
            config = write_config(args.pipeline, tmp, backend_url, store_url)
            (proc_a, url_a), (proc_b, url_b) = (_gateway(procs, n, s, config, args.stages)
                                                    for n, s in (("a", args.a), ("b", args.b)))
            api_key = probe(url_a, None, config, tmp)
            probe(url_b, api_key, config, tmp)
            for proc, url in ((proc_a, url_a), (proc_b, url_b)):
                _round(proc, url, args.conns, 1.0, api_key)       # warm
            for i in range(args.rounds):
                # A then B on even rounds, B then A on odd: neither always runs first
                order = ((proc_a, url_a), (proc_b, url_b)) if i % 2 == 0 else ((proc_b, url_b), (proc_a, url_a))
                got = [_round(p, u, args.conns, args.duration, api_key) for p, u in order]
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
                                               "rounds": rows, "median_ratio": ratio}, indent=2))


if __name__ == "__main__":
    run_main(main, "ab")
