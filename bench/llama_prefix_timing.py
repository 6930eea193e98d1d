"""Does llama.cpp's server let one tenant time another's prompt? (issue 42, docs/security.md)

The server the suite runs (``llama-cpp-python[server]``, tests/fixtures/llama_server.py, the
tiny model tests/fixtures/llama_model.py builds) behind the gateway, with two tenants and a
salted upstream (``cache_salt: tenant``, which this server ignores). In each round tenant A
sends a prompt; then tenant B sends either that same prompt ("recent") or a fresh one of the
same length ("fresh"), both halves of the round in an order a coin picks, and B's request is
timed from the client (wall time: the work is the server's, in another process). With
``--bystander N``, tenant C sends N fresh prompts between A's and B's.

    python bench/llama_prefix_timing.py [--rounds 20] [--words 1200] [--bystander 0] [--json F]

Prints the medians and the paired permutation test's p (tests/security/audit.py). The
machine is shared: pin it (``taskset -c 1``) and read the ratio, not the milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from tests.fixtures.llama_model import build_model  # noqa: E402
from tests.fixtures.llama_server import LlamaServer, available  # noqa: E402
from tests.security.audit import paired_permutation_p  # noqa: E402
from tests.support import gateway_in_process  # noqa: E402

SECRET = "0f" * 32


def config(tiny, server: LlamaServer, tmp: Path) -> str:
    return f"""
upstreams:
  llama: {{base_url: "{server.url}", read_timeout_s: 120, cache_salt: tenant}}
models:
  tiny: {{upstream: llama, tokenizer: "hf:{tiny.tokenizer}", context_window: 4096}}
plans:
  team: {{models: [tiny], max_context_tokens: 4096, max_output_tokens: 8, tokens_per_minute: 100000000,
          requests_per_minute: 1000000, max_request_work: 100000000}}
tenants:
  acme: {{plan: team}}
  globex: {{plan: team}}
  initech: {{plan: team}}
keystore: {{url: "sqlite:///{tmp}/keys.db"}}
logging: {{decisions: "off"}}
"""


async def run(args: argparse.Namespace) -> dict:
    import os

    os.environ["TOKENWARD_CACHE_SALT_SECRET"] = SECRET
    tmp = Path(tempfile.mkdtemp(prefix="tw-llama-timing-"))
    tiny = build_model(tmp / "model")
    words = tiny.corpus.read_text().split()
    rng = random.Random(args.seed)

    def prompt() -> str:
        return " ".join(rng.choice(words) for _ in range(args.words))

    server = LlamaServer(tiny.gguf, tmp / "server.log", n_ctx=4096)
    try:
        async with gateway_in_process(config(tiny, server, tmp)) as gw:
            keys = {t: await gw.new_key(t) for t in ("acme", "globex", "initech")}
            async with httpx.AsyncClient(base_url=gw.url, timeout=120) as http:

                async def send(tenant: str, text: str) -> float:
                    body = {"model": "tiny", "max_tokens": 1, "messages": [{"role": "user", "content": text}]}
                    started = time.perf_counter()
                    answer = await http.post("/v1/chat/completions", json=body,
                                             headers={"authorization": f"Bearer {keys[tenant]}"})
                    took = time.perf_counter() - started
                    answer.raise_for_status()
                    return took * 1000.0

                async def half(label: str) -> float:
                    sent = prompt()
                    await send("acme", sent)
                    for _ in range(args.bystander):
                        await send("initech", prompt())
                    return await send("globex", sent if label == "recent" else prompt())

                for _ in range(3):
                    await half("fresh")   # warm
                recent, fresh = [], []
                for _ in range(args.rounds):
                    order = ["recent", "fresh"]
                    rng.shuffle(order)
                    got = {label: await half(label) for label in order}
                    recent.append(got["recent"])
                    fresh.append(got["fresh"])
    finally:
        server.stop()
    p = paired_permutation_p(np.asarray(recent) - np.asarray(fresh))
    return {"rounds": args.rounds, "words": args.words, "bystander": args.bystander,
            "recent_ms": recent, "fresh_ms": fresh, "median_recent_ms": statistics.median(recent),
            "median_fresh_ms": statistics.median(fresh), "p": p}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--words", type=int, default=1200, help="words per prompt (the tiny model: ~2 tokens each)")
    parser.add_argument("--bystander", type=int, default=0, help="tenant C's prompts between A's and B's")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    if not available():
        raise SystemExit("llama-cpp-python[server] is not installed: run scripts/llama-wheel.sh")
    result = asyncio.run(run(args))
    print(f"{args.words} words, bystander {args.bystander}, {args.rounds} rounds: median B wall ms: "
          f"A's recent prompt {result['median_recent_ms']:.1f}, fresh {result['median_fresh_ms']:.1f}, "
          f"p={result['p']:.3g}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
