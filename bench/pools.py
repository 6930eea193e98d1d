"""Backend pools under an agent-like trace: three mock targets that behave like batching
engines, and each routing strategy over them (issue 39, docs/benchmarks.md "Backend pools").

    python bench/pools.py [--agents 24] [--turns 6] [--capacity 400] [--prefill 8000] [--kv 0] [--cap 0]
                          [--routing round_robin,least_requests,least_reserved,prefix_affinity]
                          [--workers 1,2] [--store memory|redis] [--slack 16384] [--seeds 1,2,3]
                          [--json out.json]

The targets: ``tokenward mock-upstream --capacity-tokens-per-s C --prefill-tokens-per-s P``
(mock/engine.py): all of a target's streams share C tokens a second, and a prompt's tokens
not in that target's prefix cache take 1/P s each before its first token. A loaded target
is slower for every request on it, and one that saw a prompt's beginning recently prefills
only the rest. ``--kv K`` bounds each target's KV cache (``--kv-cache-tokens``): the prompt
and output tokens of its running requests; a request that does not fit queues inside it.
``--cap N`` gives each target ``max_inflight_requests: N`` (and a queue in the gateway): each
target's peak of concurrent requests shows what N workers make of a per-process cap.

The trace (seeded, the same for every strategy): ``--agents`` agents, each a session of
``--turns`` turns: its own system prompt (150 to 1,500 words), then per turn a new user
message (10 to 150 words) after the turns so far and their answers, so the prompt grows. One
turn in five asks for a long answer (300 to 700 tokens, max_tokens 1024), the rest a short
one (10 to 60 tokens, max_tokens 256). Each agent waits for its answer, thinks (exponential,
mean 0.3 s) and sends its next turn; agents start over the first 2 s. Prompts are counted
with cl100k_base: a word of the trace is about one token, as the mock counts it.

Reported per strategy (and per number of gateway workers): latency to the last byte and to
the first byte, p50 and p99, for short and long answers apart and together; the spread of
work over the targets (each target's busy seconds, generated and prompt tokens: the largest
busy time over the mean); prefix affinity's outcomes (``notes.affinity`` in the decision
records: kept on the prefix's target, moved for load, new) and the engines' prefix-cache hit
share (prompt tokens they did not prefill); the run's length.

Placement: the gateway on CPU 0 (with --workers > 1 on CPUs 0 and 1, and a redis-server
budget store, which several workers need), the mock targets, redis and this load client on
CPU 1. Every target is started fresh for each run (empty caches).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import LOAD_CPU, PYTHON, BenchError, Procs, machine, raise_fd_limit, run_main  # noqa: E402
from overhead import create_key, start_gateway, start_redis  # noqa: E402

CHAT = "/v1/chat/completions"
ROUTINGS = ("round_robin", "least_requests", "least_reserved", "prefix_affinity")
_VOCAB = ("budget token stream tenant model answer backend replica engine cache prefix batch queue plan "
          "review agent tool call result search file patch test build deploy metric trace latency window "
          "request session gateway route health probe weight limit reserve settle charge usage prompt").split()


def words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(count))


def build_trace(seed: int, agents: int, turns: int) -> list[list[dict[str, Any]]]:
    """Per agent, its turns: the body, the tokens to generate, whether the answer is long."""
    out = []
    for agent in range(agents):
        rng = random.Random(seed * 1000 + agent)
        history = [{"role": "system", "content": f"agent {agent}: " + words(rng, rng.randint(150, 1500))}]
        session = []
        for _ in range(turns):
            history.append({"role": "user", "content": words(rng, rng.randint(10, 150))})
            long = rng.random() < 0.2
            tokens = rng.randint(300, 700) if long else rng.randint(10, 60)
            session.append({"body": {"model": "agent-model", "messages": list(history), "stream": True,
                                     "max_tokens": 1024 if long else 256},
                            "tokens": tokens, "long": long, "think": rng.expovariate(1 / 0.3)})
            history.append({"role": "assistant", "content": words(rng, tokens)})
        out.append(session)
    return out


def start_targets(procs: Procs, count: int, capacity: float, prefill: float, kv: int) -> list[str]:
    urls = []
    for i in range(count):
        proc = procs.start(f"target{i}", [PYTHON, "-m", "tokenward", "mock-upstream", "--port", "0",
                                          "--capacity-tokens-per-s", str(capacity),
                                          "--prefill-tokens-per-s", str(prefill), "--kv-cache-tokens", str(kv)],
                           LOAD_CPU)
        port = proc.wait_line(r"listening on http://127\.0\.0\.1:(\d+)").group(1)
        urls.append(f"http://127.0.0.1:{port}")
    return urls


def write_config(tmp: Path, urls: list[str], routing: str, workers: int, slack: int, cap: int,
                 store: str | None) -> Path:
    targets = [{"url": url + "/v1", **({"max_inflight_requests": cap} if cap else {})} for url in urls]
    raw = {
        "server": {"workers": workers},
        "upstreams": {"engines": {"targets": targets, "routing": routing, "queue_timeout_ms": 600_000 if cap else 0,
                                  "affinity_slack": slack, "forward_headers": ["x-mock-*"], "read_timeout_s": 300}},
        "models": {"agent-model": {"upstream": "engines", "tokenizer": "tiktoken:cl100k_base",
                                   "context_window": 131072}},
        "plans": {"team": {"models": ["agent-model"], "max_output_tokens": 4096, "max_context_tokens": 131072,
                           "tokens_per_minute": 1_000_000_000, "requests_per_minute": 1_000_000,
                           "max_concurrent_streams": 1000, "max_request_work": 1_000_000_000, "max_messages": 1000}},
        "tenants": {"bench": {"plan": "team"}},
        "keystore": {"url": f"sqlite:///{tmp / 'keys.db'}"},
        "logging": {"decisions": str(tmp / "decisions.jsonl")},
    }
    if store is not None:
        raw["store"] = {"url": store}
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


async def run_trace(url: str, key: str, trace: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    import httpx

    results: list[dict[str, Any]] = []
    limits = httpx.Limits(max_connections=len(trace) + 4, max_keepalive_connections=len(trace) + 4)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        async def agent(index: int, session: list[dict[str, Any]]) -> None:
            await asyncio.sleep(2.0 * index / len(trace))
            for turn in session:
                headers = {"authorization": f"Bearer {key}", "x-mock-tokens": str(turn["tokens"])}
                started = time.perf_counter()
                first = None
                async with client.stream("POST", CHAT, json=turn["body"], headers=headers) as resp:
                    async for _ in resp.aiter_raw():
                        if first is None:
                            first = time.perf_counter()
                ended = time.perf_counter()
                results.append({"status": resp.status_code, "long": turn["long"], "total_s": ended - started,
                                "first_s": (first or ended) - started, "id": resp.headers.get("x-request-id")})
                await asyncio.sleep(turn["think"])

        await asyncio.gather(*(agent(i, session) for i, session in enumerate(trace)))
    return results


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 1)


def latency(results: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for name, subset in (("all", results), ("short", [r for r in results if not r["long"]]),
                         ("long", [r for r in results if r["long"]])):
        total = [r["total_s"] for r in subset]
        first = [r["first_s"] for r in subset]
        out[name] = {"n": len(subset), "p50_ms": _pct(total, 0.5), "p99_ms": _pct(total, 0.99),
                     "first_p50_ms": _pct(first, 0.5), "first_p99_ms": _pct(first, 0.99)}
    return out


def spread(urls: list[str]) -> dict[str, Any]:
    import httpx

    targets = []
    for url in urls:
        stats = httpx.get(url + "/_mock/stats", timeout=10).json()
        engine = stats["engine"]
        targets.append({"generated": stats["tokens_generated"], "prompt": engine["prompt_tokens"],
                        "cached": engine["cached_prompt_tokens"], "busy_s": engine["busy_s"],
                        "queued_for_kv_s": engine["queued_for_kv_s"], "peak_streams": stats["peak_streams"]})
    busy = [t["busy_s"] for t in targets]
    prompt = sum(t["prompt"] for t in targets)
    return {"targets": targets, "busy_max_over_mean": round(max(busy) / statistics.mean(busy), 3) if any(busy) else None,
            "engine_cache_share": round(sum(t["cached"] for t in targets) / prompt, 3) if prompt else None}


def affinity(decisions: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in decisions.read_text().splitlines():
        outcome = json.loads(line).get("notes", {}).get("affinity")
        if outcome:
            counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def one_run(args: argparse.Namespace, trace: list, routing: str, workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tw-pools-") as folder, Procs(Path(folder), 900) as procs:
        tmp = Path(folder)
        urls = start_targets(procs, 3, args.capacity, args.prefill, args.kv)
        store = start_redis(procs, tmp) if workers > 1 or args.store == "redis" else None
        config = write_config(tmp, urls, routing, workers, args.slack, args.cap, store)
        gateway, gateway_url = start_gateway(procs, config, None, None, workers)
        key = create_key(config, tmp)
        cpu_before = gateway.cpu_seconds()
        started = time.monotonic()
        results = asyncio.run(run_trace(gateway_url, key, trace))
        elapsed = time.monotonic() - started
        failed = [r for r in results if r["status"] != 200]
        if failed:
            raise BenchError(f"{routing}: {len(failed)} requests failed, e.g. {failed[0]}")
        time.sleep(0.5)   # decision records are written in batches
        outcomes = affinity(tmp / "decisions.jsonl")
        known = outcomes.get("hit", 0) + outcomes.get("moved", 0)
        return {"routing": routing, "workers": workers, "requests": len(results), "run_s": round(elapsed, 1),
                "gateway_cpu_s": round(gateway.cpu_seconds() - cpu_before, 2), "latency": latency(results),
                "spread": spread(urls), "affinity": outcomes,
                "affinity_kept_share": round(outcomes.get("hit", 0) / known, 3) if known else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=24)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--capacity", type=float, default=400.0)
    parser.add_argument("--prefill", type=float, default=8000.0)
    parser.add_argument("--kv", type=int, default=0)
    parser.add_argument("--cap", type=int, default=0, help="max_inflight_requests per target, with a queue")
    parser.add_argument("--store", choices=("memory", "redis"), default="memory",
                        help="the budget store (redis whenever --workers > 1)")
    parser.add_argument("--routing", default=",".join(ROUTINGS))
    parser.add_argument("--workers", default="1")
    parser.add_argument("--slack", type=int, default=16384)
    parser.add_argument("--seeds", default="1", help="one trace per seed; the summary takes the median")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    raise_fd_limit()
    os.sched_setaffinity(0, {int(LOAD_CPU)})
    runs = []
    for seed in (int(x) for x in args.seeds.split(",")):
        trace = build_trace(seed, args.agents, args.turns)
        for workers in (int(w) for w in args.workers.split(",")):
            for routing in args.routing.split(","):
                if routing not in ROUTINGS:
                    raise BenchError(f"unknown routing {routing!r}")
                run = one_run(args, trace, routing, workers) | {"seed": seed}
                print(json.dumps(run), flush=True)
                runs.append(run)
    table = summary(runs)
    for row in table:
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "args": vars(args) | {"json": str(args.json)},
                                         "summary": table, "runs": runs}, indent=1))


def summary(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (workers, routing): the median over the seeds' runs of each figure."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["workers"], run["routing"]), []).append(run)
    rows = []
    for (workers, routing), group in groups.items():
        def med(get: Any) -> Any:
            values = [v for v in (get(r) for r in group) if v is not None]
            return round(statistics.median(values), 3) if values else None

        row: dict[str, Any] = {"summary": routing, "workers": workers, "seeds": len(group),
                               "run_s": med(lambda r: r["run_s"]),
                               "busy_max_over_mean": med(lambda r: r["spread"]["busy_max_over_mean"]),
                               "engine_cache_share": med(lambda r: r["spread"]["engine_cache_share"]),
                               "kv_queue_s": med(lambda r: sum(t["queued_for_kv_s"] for t in r["spread"]["targets"])),
                               "affinity_kept_share": med(lambda r: r["affinity_kept_share"])}
        for part in ("all", "short", "long"):
            for figure in ("p50_ms", "p99_ms", "first_p50_ms", "first_p99_ms"):
                row[f"{part}_{figure}"] = med(lambda r, p=part, f=figure: r["latency"][p][f])
        rows.append(row)
    return rows

if __name__ == "__main__":
    run_main(main, "pools")
