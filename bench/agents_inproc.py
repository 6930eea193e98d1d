"""Agents' requests through the gateway in-process (issue 43): where their CPU goes.

examples/gateway.yaml as bench/overhead.py --pipeline examples runs it (tenant acme, model
small-chat), the backend a fixed answer in the same event loop (upstream/memory.py), the
bodies bench/post.lua's agent workloads send (bench/agent_texts.py's stdlib text):

    python bench/agents_inproc.py [--workload sessions|new64k|small] [--sessions 2000]
                                  [--requests 3000] [--profile] [--top 30]

Reported: CPU per request (``time.thread_time``, the serving thread) after a warm-up that
sends every session once, and with ``--profile`` cProfile's top functions by own time.
With ``--memory``: the gateway's RSS and what its memos hold after the warm-up
(``--memo-bytes N`` sets their bound, ``memos.max_bytes``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_texts import pieces  # noqa: E402
from overhead import EXAMPLES_MODEL, EXAMPLES_TENANT, rss_mib, write_examples_config  # noqa: E402


def session_body(session: int, turn: int, history: list[str], new: list[str]) -> bytes:
    """bench/post.lua's sessions body, built the same way."""
    messages = [{"role": "user" if m % 2 == 0 else "assistant",
                 "content": f"[session {session} message {m}] " + history[(session * 16 + m) % len(history)]}
                for m in range(16)]
    messages.append({"role": "user", "content": f"turn x-{turn}: " + new[turn % len(new)]})
    return json.dumps({"model": EXAMPLES_MODEL, "max_tokens": 16, "messages": messages}).encode()


def bodies(workload: str, sessions: int) -> Callable[[int], bytes]:
    if workload == "sessions":
        history, new = pieces(4096, 2053), pieces(4000, 509, 7919)
        return lambda i: session_body(i % sessions, i, history, new)
    if workload == "new64k":
        big = pieces(65536, 131, 2 * 7919)
        return lambda i: json.dumps({"model": EXAMPLES_MODEL, "max_tokens": 16, "messages": [
            {"role": "user", "content": f"#x-{i} " + big[i % len(big)]}]}).encode()
    return lambda i: json.dumps({"model": EXAMPLES_MODEL, "max_tokens": 16,
                                 "messages": [{"role": "user", "content": "Say hello."}]}).encode()


class Backend:
    """The benchmark backend's answer as an ASGI app (bench/backend.py's, no parsing):
    upstream/memory.py runs it in the loop, so the profile holds the gateway alone."""

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        from backend import CHAT_BODY

        more = True
        while more:
            more = (await receive()).get("more_body", False)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": CHAT_BODY})


async def call(gateway: Any, auth: bytes, body: bytes) -> None:
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
             "headers": [(b"authorization", auth), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    given = False
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await gateway(scope, receive, send)
    if status != [200]:
        raise SystemExit(f"the gateway answered {status}")


def memo_report(gateway: Any) -> str:
    from tokenward import memos

    if not hasattr(memos, "held"):   # a tree from before issue 43: memos counted in entries
        return "memos: (this tree does not report them)"
    held = memos.held()
    return (f"memos: {held['entries']} entries, {held['bytes'] / 2**20:.1f} MiB as charged (no text kept) "
            f"(bound {held['bound'] / 2**20:.0f} MiB)")


async def run(args: argparse.Namespace) -> None:
    from tokenward.app import Gateway
    from tokenward.config.loader import parse_config
    from tokenward.upstream.memory import MemoryTransport

    with tempfile.TemporaryDirectory(prefix="tokenward-agents-") as tmp_name:
        tmp = Path(tmp_name)
        path = write_examples_config(tmp, "http://backend.invalid", None)
        raw = yaml.safe_load(path.read_text())
        raw["logging"]["decisions"] = str(tmp / "decisions.jsonl")
        gateway = Gateway(parse_config(yaml.safe_dump(raw), environ={}),
                          transports={"local": MemoryTransport(Backend())})
        await gateway.startup()
        if args.memo_bytes is not None:
            from tokenward import memos

            memos.configure(args.memo_bytes)
        try:
            keys = gateway.parts.keys
            assert keys is not None
            key = (await keys.create(EXAMPLES_TENANT))[0]
            auth = f"Bearer {key}".encode()
            make = bodies(args.workload, args.sessions)
            warm = args.sessions if args.workload == "sessions" else 50
            rss0 = rss_mib_self()
            for i in range(warm):
                await call(gateway, auth, make(i))
            if args.memory:
                print(f"after {warm} requests: RSS {rss_mib_self():.1f} MiB (+{rss_mib_self() - rss0:.1f} over "
                      f"the warm-up); " + memo_report(gateway), flush=True)
            work = [make(warm + i) for i in range(args.requests)]
            profiler = cProfile.Profile() if args.profile else None
            started = time.thread_time()
            if profiler:
                profiler.enable()
            for body in work:
                await call(gateway, auth, body)
            if profiler:
                profiler.disable()
            took = time.thread_time() - started
            print(f"{args.workload} {args.sessions if args.workload == 'sessions' else ''}: "
                  f"{took * 1e6 / len(work):.1f} us CPU per request over {len(work)} requests")
            if profiler:
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats(args.sort).print_stats(args.top)
                print(out.getvalue())
        finally:
            await gateway.shutdown()


def rss_mib_self() -> float:
    import os

    return rss_mib(os.getpid())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", choices=("sessions", "new64k", "small"), default="sessions")
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--memo-bytes", type=int, help="memos.max_bytes (default: the config's default)")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sort", default="tottime", help="cProfile's order: tottime, cumulative")
    args = parser.parse_args()
    try:
        import uvloop
        uvloop.run(run(args))
    except ImportError:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
