"""What screening, masking and the cache add per request, in-process, in one run.

    python bench/content_cost.py [--requests 4000] [--rounds 5]

Four measurements, the variants of each interleaved round by round (the least CPU of each
variant over the rounds is kept: other load only ever adds):

1. the built-in detectors alone (injection heuristic + personal-data patterns) on a
   2 KB prose prompt, and on 2 KB of short instructions: CPU microseconds per prompt
   (target: <= 200);
2. the full pipeline (bench/full.yaml, memory store) with a 2 KB prompt, with the
   ``standard`` screening policy (injection heuristic, PII tokenize) on and off
   (target: at most +25% CPU per request), and with a prompt carrying personal data
   (masked, and restored in the answer);
3. the cache: a miss against the cache off (target: at most +10 us), and a hit against a
   forwarded request through the same pipeline (target: at most half its CPU);
4. the stream restorer: CPU per chunk with nothing to restore and with a placeholder
   split across chunks (target: <= 5 us per chunk); the output screen per chunk.

Like inproc.py this times the gateway's own Python work: no sockets, a stub backend.
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

PROSE = ("The quarterly report covers revenue, operating costs and the hiring plan for the next two "
         "quarters. Please summarise the main risks, list the open questions for the finance team, "
         "and suggest three follow-up actions with owners and dates. ")
PROMPT = (PROSE * 12)[:2048]
PII_PROMPT = PROMPT[:1900] + " Contact jane.doe@example.com or +1 415 555 0132."


def body(prompt: str, salt: str = "") -> bytes:
    import msgspec

    return msgspec.json.encode({"model": "bench-chat", "max_tokens": 16,
                                "messages": [{"role": "user", "content": prompt + salt}]})


def config(tmp: str, screening: bool, cache: bool) -> Path:
    raw = yaml.safe_load((HERE / "full.yaml").read_text())
    raw["upstreams"]["bench"]["base_url"] = "http://127.0.0.1:9/v1"
    raw["logging"]["decisions"] = os.path.join(tmp, "decisions.jsonl")
    raw["keystore"]["url"] = f"sqlite:///{tmp}/keys.db"
    raw["keystore"]["cache_ttl_s"] = 3600.0
    if screening:
        raw["screening"] = {"policies": {"standard": {"injection": {"detector": "heuristic"},
                                                      "pii": {"detector": "patterns", "mode": "tokenize"}}}}
        raw["plans"]["bench"]["screening"] = "standard"
    if cache:
        raw["cache"] = {"store": "memory", "max_entries": 10_000}
        raw["plans"]["bench"]["cache"] = True
    path = Path(tmp) / f"gateway-{int(screening)}{int(cache)}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


async def start(tmp: str, screening: bool, cache: bool):
    from tokenward.app import Gateway
    from tokenward.config import load_config

    ticks = itertools.count(1_800_000_000_000)
    gateway = Gateway(load_config(config(tmp, screening, cache)), clock=lambda: next(ticks) / 1000)
    await gateway.startup()
    stub_pools(gateway, 0)
    key, _ = await gateway.parts.keys.create("bench")
    return gateway, key


async def cpu_per_request(gateway, key: str, bodies, n: int) -> float:
    started = time.process_time()
    for i in range(n):
        payload = bodies(i)
        await one_request(gateway, make_scope(key, payload), payload, [])
    return (time.process_time() - started) * 1e6 / n


def detectors_cost(n: int) -> tuple[float, float]:
    from tokenward.pii.patterns import PatternDetector
    from tokenward.screening.injection import HeuristicInjection

    injection, pii = HeuristicInjection(), PatternDetector()
    out = []
    for prompt in (PROMPT, PII_PROMPT):
        injection.score([prompt])
        pii.find(prompt)
        started = time.process_time()
        for _ in range(n):
            injection.score([prompt])
            pii.find(prompt)
        out.append((time.process_time() - started) * 1e6 / n)
    return out[0], out[1]


def instructions_cost(n: int) -> tuple[float, float]:
    """The detectors on 2 KB of short instructions: the benign evaluation prompts
    (tests/screening/injection_eval.py) joined in a seeded order, each text unique. Text
    dense with imperatives ("write", "explain", "what", "list") gives the injection
    heuristic many more places to try a pattern than prose does. (injection, PII) us."""
    import random

    sys.path.insert(0, str(HERE.parent))
    from tests.screening.injection_eval import BENIGN
    from tokenward.pii.patterns import PatternDetector
    from tokenward.screening.injection import HeuristicInjection

    rng = random.Random(1)
    texts = []
    for i in range(n):
        parts, size = [], 0
        while size < 2048:
            parts.append(rng.choice(BENIGN))
            size += len(parts[-1]) + 1
        texts.append(" ".join(parts)[:2048] + f" #{i}")
    injection, pii = HeuristicInjection(), PatternDetector()
    for text in texts:                 # every pattern these texts reach compiled first
        injection.signals(text + " ")
    out = []
    for run in (injection.signals, pii.find):
        started = time.process_time()
        for text in texts:
            run(text)
        out.append((time.process_time() - started) * 1e6 / n)
    return out[0], out[1]


def restore_cost(n: int) -> tuple[float, float]:
    import msgspec

    from tokenward.pii.placeholders import Restorer
    from tokenward.wire.sse import SseEvent

    def event(text: str) -> SseEvent:
        return SseEvent(b"data: " + msgspec.json.encode({"id": "c", "object": "chat.completion.chunk", "model": "m",
                                                           "choices": [{"index": 0, "delta": {"content": text},
                                                                        "finish_reason": None}]}) + b"\n\n")

    plain = [event(" word") for _ in range(n)]
    split = [event(piece) for _ in range(n // 4) for piece in (" mail {EMA", "IL_0}", " and", " more")]
    out = []
    for events in (plain, split):
        restorer = Restorer({"EMAIL_0": "jane.doe@example.com"}, set())
        fresh = [SseEvent(e.raw) for e in events]   # no typed view cached yet: the relay's decode is counted
        started = time.process_time()
        for e in fresh:
            restorer.events([e])
        out.append((time.process_time() - started) * 1e6 / len(events))
    return out[0], out[1]


def output_screen_cost(n: int) -> float:
    """The output screen (pii.output: redact) per streamed chunk of ordinary prose."""
    import msgspec

    from tokenward.pii.output import OutputRedactor
    from tokenward.pii.patterns import PatternDetector
    from tokenward.wire.sse import SseEvent

    words = PROSE.split(" ")
    events = [SseEvent(b"data: " + msgspec.json.encode({
        "id": "c", "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "delta": {"content": " " + words[i % len(words)]}, "finish_reason": None}]})
        + b"\n\n") for i in range(n)]
    redactor = OutputRedactor(PatternDetector().find, {})
    started = time.process_time()
    for e in events:
        redactor.events([e])
    redactor.finish()
    return (time.process_time() - started) * 1e6 / n


async def pipelines(n: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="tw-content-") as tmp:
        off = await start(tmp, False, False)
        screened = await start(tmp, True, False)
        cached = await start(tmp, False, True)
        counter = itertools.count()
        short = "Say hello."
        # every prompt unique (a counter at its end), so no detector result is remembered
        salt = lambda: f" #{next(counter)}"  # noqa: E731
        variants = {
            "off-short": (off, lambda i: body(short, salt())),
            "screening-short": (screened, lambda i: body(short, salt())),
            "off": (off, lambda i: body(PROMPT, salt())),
            "screening": (screened, lambda i: body(PROMPT, salt())),
            "screening+pii": (screened, lambda i: body(PII_PROMPT, salt())),
            "cache-off-unique": (off, lambda i: body(PROMPT, salt())),
            "cache-miss": (cached, lambda i: body(PROMPT, salt())),
            "cache-hit": (cached, lambda i: body(PROMPT)),
        }
        best = {name: float("inf") for name in variants}
        for (gateway, key), bodies in variants.values():    # warm each
            await cpu_per_request(gateway, key, bodies, 300)
        for _ in range(rounds):
            for name, ((gateway, key), bodies) in variants.items():
                best[name] = min(best[name], await cpu_per_request(gateway, key, bodies, n))
        for gateway, _ in (off, screened, cached):
            await gateway.shutdown()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    clean, with_pii = detectors_cost(2000)
    print(f"detectors (heuristic + patterns), 2 KB prompt: {clean:.1f} us CPU; with personal data: {with_pii:.1f} us")
    inj, pii = instructions_cost(1000)
    print(f"detectors on 2 KB of short instructions: injection {inj:.1f} + PII {pii:.1f} = {inj + pii:.1f} us CPU")
    plain, split = restore_cost(20000)
    print(f"stream restore: {plain:.2f} us per chunk with nothing to restore, {split:.2f} us with a split placeholder")
    print(f"output screen (pii.output: redact): {output_screen_cost(20000):.2f} us per streamed chunk of prose")
    best = asyncio.run(pipelines(args.requests, args.rounds))
    for name, value in best.items():
        print(f"  {name:18} {value:7.1f} us CPU per request")
    print(f"standard policy on / off, a short prompt: {best['screening-short'] / best['off-short']:.3f}x "
          f"(+{best['screening-short'] - best['off-short']:.1f} us)")
    print(f"standard policy on / off, a 2 KB prompt: {best['screening'] / best['off']:.3f}x "
          f"(+{best['screening'] - best['off']:.1f} us); with personal data masked and restored: "
          f"{best['screening+pii'] / best['off']:.3f}x")
    print(f"cache miss - cache off: {best['cache-miss'] - best['cache-off-unique']:+.1f} us; "
          f"hit / forwarded: {best['cache-hit'] / best['cache-off-unique']:.3f}")


if __name__ == "__main__":
    main()
