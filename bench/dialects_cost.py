"""What a translated request adds over the same chat request: CPU per request, side by side.

    python bench/dialects_cost.py [--requests 2000] [--rounds 5] [--chunks 16]
    python bench/dialects_cost.py --parts
    python bench/dialects_cost.py --instructions      # callgrind, free of host noise: ~20 minutes

The whole pipeline in-process (bench/full.yaml, memory store, a stub backend that answers
at once, as bench/inproc.py and bench/content_cost.py do): the same conversation sent as
``/v1/chat/completions``, as ``/v1/responses`` and as ``/v1/messages``, whole and streamed
(``--chunks`` chat chunks of one token each, then the usage chunk), plus
``/v1/messages/count_tokens``. The variants run interleaved, round by round; the least CPU
(``time.process_time``) of each over the rounds is kept, since other load only ever adds.
A dialect request is parsed strictly, translated to chat, then goes through the same stages
as chat; its answer is translated back (whole, or event by event).
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

import msgspec
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from inproc import one_request, stub_pools  # noqa: E402

SYSTEM = "You are a concise assistant for a platform team."
TURNS = ["Summarise the incident report in three bullet points.", "Here are the bullets: ...",
         "Now list two follow-up actions with owners."]


def bodies(stream: bool) -> dict[str, tuple[str, bytes]]:
    """The same three-turn conversation with a system prompt, in each API."""
    roles = ["user", "assistant", "user"]
    chat = {"model": "bench-chat", "max_tokens": 16,
            "messages": [{"role": "system", "content": SYSTEM}] + [{"role": r, "content": t} for r, t in zip(roles, TURNS)]}
    responses = {"model": "bench-chat", "max_output_tokens": 16, "instructions": SYSTEM,
                 "input": [{"role": r, "content": t} for r, t in zip(roles, TURNS)]}
    messages = {"model": "bench-chat", "max_tokens": 16, "system": SYSTEM,
                "messages": [{"role": r, "content": t} for r, t in zip(roles, TURNS)]}
    if stream:
        chat |= {"stream": True, "stream_options": {"include_usage": True}}
        responses["stream"] = messages["stream"] = True
    out = {"chat": ("/v1/chat/completions", chat), "responses": ("/v1/responses", responses),
           "messages": ("/v1/messages", messages)}
    if not stream:
        count = dict(messages)
        del count["max_tokens"]
        out["count_tokens"] = ("/v1/messages/count_tokens", count)
    return {name: (path, msgspec.json.encode(body)) for name, (path, body) in out.items()}


def scope(path: str, key: str, body: bytes) -> dict:
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode()), (b"authorization", b"Bearer " + key.encode())]
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
            "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8080)}


async def start(tmp: str, chunks: int):
    from tokenward.app import Gateway
    from tokenward.config import load_config

    raw = yaml.safe_load((HERE / "full.yaml").read_text())
    raw["upstreams"]["bench"]["base_url"] = "http://127.0.0.1:9/v1"
    raw["store"] = {"url": "memory"}
    raw["logging"]["decisions"] = os.path.join(tmp, f"decisions-{chunks}.jsonl")
    raw["keystore"]["url"] = f"sqlite:///{tmp}/keys-{chunks}.db"
    raw["keystore"]["cache_ttl_s"] = 3600.0
    path = Path(tmp) / f"gateway-{chunks}.yaml"
    path.write_text(yaml.safe_dump(raw))
    ticks = itertools.count(1_800_000_000_000)
    gateway = Gateway(load_config(path), clock=lambda: next(ticks) / 1000)
    await gateway.startup()
    stub_pools(gateway, chunks)
    key, _ = await gateway.parts.keys.create("bench")
    return gateway, key


async def cpu_us(gateway, key: str, path: str, body: bytes, n: int) -> float:
    sink: list[bytes] = []
    started = time.process_time()
    for _ in range(n):
        await one_request(gateway, scope(path, key, body), body, sink)
        sink.clear()
    return (time.process_time() - started) * 1e6 / n


async def check(gateway, key: str, path: str, body: bytes) -> None:
    sink: list[bytes] = []
    await one_request(gateway, scope(path, key, body), body, sink)
    head = b"".join(sink)[:12]
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"{path} was not answered 200: {b''.join(sink)[:300]!r}")


async def main(args) -> None:
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tokenward-dialects-") as tmp:
        for stream, chunks in ((False, 0), (True, args.chunks)):
            gateway, key = await start(tmp, chunks)
            try:
                variants = bodies(stream)
                for path, body in variants.values():
                    await check(gateway, key, path, body)
                    await cpu_us(gateway, key, path, body, 200)   # warm: tokenizers, caches
                best: dict[str, float] = {}
                for _ in range(args.rounds):
                    for name, (path, body) in variants.items():
                        value = await cpu_us(gateway, key, path, body, args.requests)
                        label = f"{name} {'streamed' if stream else 'whole'}"
                        best[label] = min(best.get(label, value), value)
                results |= best
            finally:
                await gateway.shutdown()
    print(f"CPU per request, least of {args.rounds} interleaved rounds of {args.requests} "
          f"(streams: {args.chunks} chunks + usage)")
    for label, value in results.items():
        kind = label.split()[1]
        base = results[f"chat {kind}"]
        print(f"  {label:24s} {value:8.1f} us   {value - base:+7.1f} us vs chat ({(value / base - 1) * 100:+.0f}%)")


def parts(n: int = 20000) -> None:
    """The translation's own pieces, alone: parse + translate + encode the request, write
    the answer back, rewrite the rate-limit headers in Anthropic's convention."""
    from backend import CHAT_BODY
    from tokenward.dialects import common, messages_schema, messages_translate, ratelimit
    from tokenward.dialects import responses_schema, responses_translate

    for name, parse, translate, answer in (
            ("responses", responses_schema.parse, responses_translate, responses_translate.response_from_chat),
            ("messages", messages_schema.parse, messages_translate, messages_translate.message_from_chat)):
        body = bodies(False)[name][1]
        started = time.process_time()
        for _ in range(n):
            parsed = parse(body)
            common.encode(translate.chat_request(parsed))
        middle = time.process_time()
        for _ in range(n):
            common.encode(answer(CHAT_BODY, parsed))
        done = time.process_time()
        print(f"  {name:10s} parse + translate {(middle - started) * 1e6 / n:5.1f} us, "
              f"answer back {(done - middle) * 1e6 / n:5.1f} us")
    headers = [(b"x-ratelimit-limit-requests", b"100"), (b"x-ratelimit-remaining-requests", b"99"),
               (b"x-ratelimit-reset-requests", b"20ms"), (b"x-ratelimit-limit-tokens", b"100000"),
               (b"x-ratelimit-remaining-tokens", b"99000"), (b"x-ratelimit-reset-tokens", b"6m0s")]
    started = time.process_time()
    for _ in range(n):
        ratelimit.anthropic_from_openai(headers, 1.8e9)
    print(f"  anthropic rate-limit headers {(time.process_time() - started) * 1e6 / n:5.1f} us")


async def only(name: str, stream: bool, requests: int, chunks: int) -> None:
    """``requests`` of one variant and nothing else (what ``--instructions`` counts)."""
    with tempfile.TemporaryDirectory(prefix="tokenward-dialects-") as tmp:
        gateway, key = await start(tmp, chunks if stream else 0)
        try:
            path, body = bodies(stream)[name]
            await check(gateway, key, path, body)
            sink: list[bytes] = []
            for _ in range(requests):
                await one_request(gateway, scope(path, key, body), body, sink)
                sink.clear()
        finally:
            await gateway.shutdown()


def instructions(chunks: int, low: int = 100, high: int = 400) -> None:
    """Instructions per request under valgrind's callgrind, as bench/instructions.py counts
    them: two runs of one variant, ``low`` and ``high`` requests, the difference divided by
    the requests between them (start-up cancels out; PYTHONHASHSEED fixed)."""
    import re
    import subprocess

    def count(name: str, stream: bool, requests: int, workdir: str) -> int:
        argv = [sys.executable, __file__, "--only", name, "--requests", str(requests), "--chunks", str(chunks)]
        if stream:
            argv.append("--stream")
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={workdir}/cg.%p.out", *argv],
                              capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, timeout=1800)
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or not found:
            raise SystemExit(f"callgrind run failed: {done.stderr[-1500:]}")
        return int(found.group(1))

    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tokenward-dialects-cg-") as workdir:
        for stream in (False, True):
            for name in ("chat", "responses", "messages"):
                label = f"{name} {'streamed' if stream else 'whole'}"
                results[label] = (count(name, stream, high, workdir) - count(name, stream, low, workdir)) / (high - low)
                print(f"  {label:24s} {results[label] / 1000:8.1f}K instructions", flush=True)
    print(f"Instructions per request (callgrind, {high} - {low} requests; streams: {chunks} chunks + usage)")
    for label, value in results.items():
        base = results[f"chat {label.split()[1]}"]
        print(f"  {label:24s} {value / 1000:8.1f}K   {(value - base) / 1000:+7.1f}K vs chat ({(value / base - 1) * 100:+.0f}%)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--parts", action="store_true", help="only the translation's own pieces")
    parser.add_argument("--instructions", action="store_true", help="instructions per request (callgrind)")
    parser.add_argument("--only", help="run --requests of one variant (chat, responses, messages, count_tokens)")
    parser.add_argument("--stream", action="store_true", help="with --only: the streamed variant")
    arguments = parser.parse_args()
    if arguments.parts:
        parts()
    elif arguments.instructions:
        instructions(arguments.chunks)
    elif arguments.only:
        asyncio.run(only(arguments.only, arguments.stream, arguments.requests, arguments.chunks))
    else:
        asyncio.run(main(arguments))
