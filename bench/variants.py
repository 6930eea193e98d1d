"""Price parts of the gateway by switching them off (gateway_launcher.py's BENCH_WITHOUT),
measured in the real server under the same wrk load, interleaved so other people's load
on a shared machine hits every variant alike.

    python bench/variants.py [--stages edge] [--duration 5] [--rounds 3] \
        [--variants "-,watch,record,proxyheaders,gc,watch+record+proxyheaders+gc"]

Each variant is a gateway process on CPU 0 (backend and wrk on CPU 1, as in overhead.py).
Reported per variant: median requests/s and median CPU per request over the rounds, and
the minimal uvicorn+UpstreamPool pass-through as the floor ("reference").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    BENCH_DIR, GATEWAY_CPU, PYTHON, BenchError, Procs, machine, post_when_up, raise_fd_limit, require, run_wrk,
    set_priority, run_main,
)
from overhead import CHAT, PROBE_BODY, probe, start_backend, write_config  # noqa: E402


def start_variant(procs: Procs, name: str, target: str, stages: str | None, without: str):
    """A gateway on config file ``target``, or for "reference" a minimal proxy to URL ``target``."""
    env = dict(os.environ)
    env.pop("BENCH_STAGES", None)
    if stages is not None:
        env["BENCH_STAGES"] = stages
    env["BENCH_WITHOUT"] = "" if without == "-" else without.replace("+", ",")
    if name == "reference":
        argv = [PYTHON, str(BENCH_DIR / "candidate_proxy.py"), "--server", "uvicorn", "--client", "lean",
                "--upstream", target]
        pattern = r"proxy listening on http://127\.0\.0\.1:(\d+)"
    else:
        argv = [PYTHON, str(BENCH_DIR / "gateway_launcher.py"), "serve", "--config", target, "--port", "0"]
        pattern = r"tokenward listening on http://127\.0\.0\.1:(\d+)"
    proc = procs.start(f"variant-{len(procs.procs)}", argv, GATEWAY_CPU, env)
    url = "http://127.0.0.1:" + proc.wait_line(pattern).group(1)
    return proc, url


def one(procs: Procs, name: str, target: str, stages: str | None, tmp: Path, args) -> dict:
    proc, url = start_variant(procs, name, target, stages, name)
    try:
        status, body = post_when_up(url + CHAT, PROBE_BODY)
        api_key = None
        if status == 401:
            api_key = probe(url, None, Path(target), tmp)
        elif status != 200:
            raise BenchError(f"variant {name} answered {status}: {body[:300]!r}")
        env = {"BENCH_API_KEY": api_key or ""}
        run_wrk(url + CHAT, args.conns, 1, env)
        before = proc.cpu_seconds()
        result = run_wrk(url + CHAT, args.conns, args.duration, env)
        used = proc.cpu_seconds() - before
        return {"rps": result["rps"], "errors": result["errors"], "p50_us": result["p50_us"],
                "cpu_us_per_request": used * 1e6 / max(result["requests"], 1),
                "cpu0_util": used / (result["duration_us"] / 1e6)}
    finally:
        proc.stop()
        procs.procs.remove(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stages", default="edge")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--conns", type=int, default=32)
    parser.add_argument("--variants", default="-,watch,record,proxyheaders,gc,watch+record+proxyheaders+gc")
    parser.add_argument("--nice", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args()
    require("wrk")
    raise_fd_limit()
    set_priority(args.nice)
    info = machine()
    variants = ["reference", *args.variants.split(",")]
    samples: dict[str, list[dict]] = {v: [] for v in variants}
    stages = None if args.stages == "all" else args.stages
    with tempfile.TemporaryDirectory(prefix="tokenward-variants-") as tmp_name:
        tmp = Path(tmp_name)
        with Procs(tmp, deadline_s=len(variants) * args.rounds * (args.duration + 20) + 120) as procs:
            _, backend_url = start_backend(procs, 20.0)
            config = write_config("foundation", tmp, backend_url, None)
            for _ in range(args.rounds):
                for name in variants:
                    target = backend_url if name == "reference" else str(config)
                    samples[name].append(one(procs, name, target, stages, tmp, args))
    print(f"stages: {args.stages}; c={args.conns}; {args.rounds} rounds of {args.duration:g}s; medians")
    print(f"{'switched off':<34}{'req/s':>9}{'CPU us/req':>12}{'cpu0':>7}{'errors':>8}")
    summary = {}
    for name, runs in samples.items():
        row = {key: statistics.median(r[key] for r in runs) for key in ("rps", "cpu_us_per_request", "cpu0_util")}
        row["errors"] = sum(r["errors"] for r in runs)
        summary[name] = row
        label = "nothing (the gateway as built)" if name == "-" else name
        print(f"{label:<34}{row['rps']:>9.0f}{row['cpu_us_per_request']:>12.1f}{row['cpu0_util']:>7.2f}"
              f"{row['errors']:>8}")
    info["loadavg_end"] = os.getloadavg()
    print(f"load average at start {info['loadavg_start']}, at end {info['loadavg_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "samples": samples, "machine": info}, indent=2))


if __name__ == "__main__":
    run_main(main, "variants")
