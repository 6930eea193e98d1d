"""What a natively forwarded Responses or Messages request costs, before and after a change.

    python bench/native_cost.py --instructions          # callgrind, free of host noise
    TOKENWARD_SRC=/path/to/other/tree/src python bench/native_cost.py --instructions

The whole pipeline in-process (bench/full.yaml, memory store) with an upstream that serves
both APIs natively (``dialects: [chat, responses, messages]``) and a stub that answers at
once in the API's own shape: whole, or streamed in ``--chunks`` text deltas and the closing
events. The request is the same three-turn conversation as bench/dialects_cost.py, with
nothing any stage changes, so a tree that forwards the client's bytes and one that renders
the body from its parse (issue 36) are compared on the same work. ``TOKENWARD_SRC`` runs
the same bench against another checkout's ``src`` (the tree before a change).

Instructions per request: two callgrind runs of one variant, ``--low`` and ``--high``
requests, the difference divided by the requests between them (start-up cancels out;
PYTHONHASHSEED fixed), as bench/instructions.py counts them.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from dialects_cost import bodies, check, scope  # noqa: E402
from inproc import one_request  # noqa: E402

# after those imports (dialects_cost puts this checkout's src first): the tree measured
sys.path.insert(0, os.environ.get("TOKENWARD_SRC", str(HERE.parent / "src")))


def _sse(kind: str, data: dict) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + json.dumps(data).encode() + b"\n\n"


def native_answer(path: str, chunks: int) -> tuple[bytes, list[bytes]]:
    """(a whole answer, the events of a streamed one) in the API ``path`` names."""
    if path.endswith("/responses"):
        msg = {"id": "msg_b", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": "tok " * chunks, "annotations": []}]}
        response = {"id": "resp_b", "object": "response", "created_at": 1, "status": "completed",
                    "model": "bench-chat", "output": [msg], "usage": {"input_tokens": 40, "output_tokens": chunks}}
        events = [_sse("response.created", {"type": "response.created", "sequence_number": 0,
                                             "response": {**response, "status": "in_progress", "output": []}})]
        events += [_sse("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": i + 1,
                                                       "item_id": "msg_b", "output_index": 0, "content_index": 0,
                                                       "delta": "tok "}) for i in range(chunks)]
        events.append(_sse("response.completed", {"type": "response.completed", "sequence_number": chunks + 1,
                                                  "response": response}))
        return json.dumps(response).encode(), events
    message = {"id": "msg_b", "type": "message", "role": "assistant", "model": "bench-chat",
               "content": [{"type": "text", "text": "tok " * chunks}], "stop_reason": "end_turn",
               "stop_sequence": None, "usage": {"input_tokens": 40, "output_tokens": chunks}}
    events = [_sse("message_start", {"type": "message_start", "message": {**message, "content": [],
                                                                          "usage": {"input_tokens": 40,
                                                                                    "output_tokens": 1}}}),
              _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})]
    events += [_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                            "delta": {"type": "text_delta", "text": "tok "}}) for _ in range(chunks)]
    events += [_sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
               _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                      "usage": {"output_tokens": chunks}}),
               _sse("message_stop", {"type": "message_stop"})]
    return json.dumps(message).encode(), events


class NativeStub:
    def __init__(self, path: str, stream: bool, chunks: int) -> None:
        self.status = 200
        self._stream = stream
        self._whole, events = native_answer(path, chunks)
        self._events = list(events)

    def header(self, name: bytes) -> bytes | None:
        if name == b"content-type":
            return b"text/event-stream" if self._stream else b"application/json"
        return None

    async def read(self, timeout=None, limit=None) -> bytes:
        return self._whole

    async def next_chunk(self, timeout=None) -> bytes | None:
        return self._events.pop(0) if self._events else None

    def abort(self) -> None:
        pass


async def start(tmp: str, stream: bool, chunks: int):
    from tokenward.app import Gateway
    from tokenward.config import load_config

    raw = yaml.safe_load((HERE / "full.yaml").read_text())
    raw["upstreams"]["bench"]["base_url"] = "http://127.0.0.1:9/v1"
    raw["upstreams"]["bench"]["dialects"] = ["chat", "responses", "messages"]
    raw["store"] = {"url": "memory"}
    raw["logging"]["decisions"] = os.path.join(tmp, "decisions.jsonl")
    raw["keystore"]["url"] = f"sqlite:///{tmp}/keys.db"
    raw["keystore"]["cache_ttl_s"] = 3600.0
    raw.pop("abuse", None)
    path = Path(tmp) / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw))
    ticks = itertools.count(1_800_000_000_000)
    gateway = Gateway(load_config(path), clock=lambda: next(ticks) / 1000)
    await gateway.startup()

    async def request(method, upstream_path, headers, body, *, timeout=None):
        return NativeStub(upstream_path, stream, chunks)

    for pool in gateway.parts.targets.pools.values():
        pool.request = request
    key, _ = await gateway.parts.keys.create("bench")
    return gateway, key


async def only(name: str, stream: bool, requests: int, chunks: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tokenward-native-") as tmp:
        gateway, key = await start(tmp, stream, chunks)
        try:
            path, body = bodies(stream)[name]
            await check(gateway, key, path, body)
            sink: list[bytes] = []
            for _ in range(requests):
                await one_request(gateway, scope(path, key, body), body, sink)
                sink.clear()
        finally:
            await gateway.shutdown()


def instructions(chunks: int, low: int, high: int) -> dict[str, float]:
    def count(name: str, stream: bool, requests: int, workdir: str) -> int:
        argv = [sys.executable, __file__, "--only", name, "--requests", str(requests), "--chunks", str(chunks)]
        if stream:
            argv.append("--stream")
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={workdir}/cg.%p.out", *argv],
                              capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, timeout=3600)
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or not found:
            raise SystemExit(f"callgrind run failed: {done.stderr[-1500:]}")
        return int(found.group(1))

    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tokenward-native-cg-") as workdir:
        for stream in (False, True):
            for name in ("responses", "messages"):
                label = f"{name} native {'streamed' if stream else 'whole'}"
                results[label] = (count(name, stream, high, workdir) - count(name, stream, low, workdir)) / (high - low)
                print(f"  {label:28s} {results[label] / 1000:8.1f}K instructions a request", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--only")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--low", type=int, default=100)
    parser.add_argument("--high", type=int, default=400)
    args = parser.parse_args()
    if args.only:
        import tokenward

        print(f"tokenward from {Path(tokenward.__file__).parent}", file=sys.stderr)
        asyncio.run(only(args.only, args.stream, args.requests, args.chunks))
    elif args.instructions:
        print(f"src: {os.environ.get('TOKENWARD_SRC', HERE.parent / 'src')}")
        instructions(args.chunks, args.low, args.high)
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
