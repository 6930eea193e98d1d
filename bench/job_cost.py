"""What joining an agent job adds per request, in-process, in one run.

    python bench/job_cost.py [--requests 4000] [--rounds 5]

The full pipeline (bench/full.yaml, memory store, stub backend) with and without the
``x-tokenward-job`` header, rounds interleaved, the least CPU of each variant kept. A job
request adds the job's checks to its reservation, the dispatch check before it is sent,
its registration with the job watcher, and the job's share of the settle.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from inproc import make_scope, one_request, stub_pools  # noqa: E402


async def main(n: int, rounds: int) -> None:
    from tokenward.app import Gateway
    from tokenward.config import load_config
    from tokenward.jobs.terms import JobRequest

    with tempfile.TemporaryDirectory(prefix="tw-jobcost-") as tmp:
        raw = yaml.safe_load((HERE / "full.yaml").read_text())
        raw["upstreams"]["bench"]["base_url"] = "http://127.0.0.1:9/v1"
        raw["logging"]["decisions"] = os.path.join(tmp, "decisions.jsonl")
        raw["keystore"]["url"] = f"sqlite:///{tmp}/keys.db"
        raw["keystore"]["cache_ttl_s"] = 3600.0
        raw["plans"]["bench"].update({"max_job_tokens": 2_000_000_000, "max_open_jobs": 4})
        path = Path(tmp) / "gateway.yaml"
        path.write_text(yaml.safe_dump(raw))
        ticks = itertools.count(1_800_000_000_000)
        gateway = Gateway(load_config(path), clock=lambda: next(ticks) / 1000)
        await gateway.startup()
        stub_pools(gateway, 0)
        key, _ = await gateway.parts.keys.create("bench")
        book = gateway.parts.jobs
        plan = gateway.parts.config.plans["bench"]
        job = await book.create("bench", plan, JobRequest(budget_tokens=2_000_000_000, max_seconds=3600))
        body = b'{"model":"bench-chat","max_tokens":16,"messages":[{"role":"user","content":"Say hello."}]}'
        plain = make_scope(key, body)
        joined = make_scope(key, body)
        joined["headers"] = [*joined["headers"], (b"x-tokenward-job", job.id.encode())]
        best = {"plain": float("inf"), "job": float("inf")}
        for scope in (plain, joined):
            for _ in range(300):
                await one_request(gateway, scope, body, [])
        for _ in range(rounds):
            for name, scope in (("plain", plain), ("job", joined)):
                started = time.process_time()
                for _ in range(n):
                    await one_request(gateway, scope, body, [])
                best[name] = min(best[name], (time.process_time() - started) * 1e6 / n)
        view = await book.view("bench", job.id)
        await gateway.shutdown()
    print(f"plain {best['plain']:.1f} us CPU per request, in a job {best['job']:.1f} us: "
          f"+{best['job'] - best['plain']:.1f} us ({best['job'] / best['plain']:.3f}x); "
          f"the job counted {view['attempts']} attempts, {view['reserved_tokens']} tokens still reserved")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.rounds))
