"""Running the mock upstream under uvicorn: embedded in a running loop, or standalone.

The listening socket is bound here, not by uvicorn, so ``port=0`` works and the caller
learns the real port before the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import socket
import sys
from typing import Any, Iterator

import uvicorn

from .app import MockUpstream
from .engine import Engine

_HAS_UVLOOP = importlib.util.find_spec("uvloop") is not None


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server living inside someone else's event loop."""

    task: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The host process (a test run, the gateway) owns SIGINT/SIGTERM.
        yield


def _config(app: MockUpstream, **overrides: Any) -> uvicorn.Config:
    options: dict[str, Any] = dict(
        loop="uvloop" if _HAS_UVLOOP else "asyncio",
        http="httptools",
        access_log=False,
        lifespan="off",
        log_level="warning",
        proxy_headers=False,
    )
    options.update(overrides)
    return uvicorn.Config(app, **options)


def bind_socket(host: str, port: int) -> socket.socket:
    """A bound, not yet listening TCP socket (uvicorn calls listen())."""
    family, kind, proto, _, addr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def start_mock(host: str = "127.0.0.1", port: int = 0) -> tuple[uvicorn.Server, int, MockUpstream]:
    """Start a mock upstream in the running loop; return once it accepts connections."""
    app = MockUpstream()
    sock = bind_socket(host, port)
    real_port = sock.getsockname()[1]
    # log_config=None: an embedded server must not reconfigure the host's logging.
    server = _EmbeddedServer(_config(app, log_config=None))
    server.task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        if server.task.done():
            sock.close()
            server.task.result()
            raise RuntimeError("mock upstream exited during start-up")
        await asyncio.sleep(0.002)
    return server, real_port, app


async def stop_mock(server: uvicorn.Server) -> None:
    """Stop a server from ``start_mock``; requests still in flight are cut off."""
    server.should_exit = True
    # A held, hung or stalled request would keep uvicorn's graceful shutdown waiting
    # forever; a stopped mock should look like a backend that went away.
    for conn in list(server.server_state.connections):
        cycle = getattr(conn, "cycle", None)
        transport = getattr(conn, "transport", None)
        if cycle is not None and not cycle.response_complete and transport is not None:
            transport.abort()
    task = getattr(server, "task", None)
    if task is not None:
        await task


def run_mock(host: str = "127.0.0.1", port: int = 9100, capacity_tokens_per_s: float | None = None,
             prefill_tokens_per_s: float = 0.0, kv_cache_tokens: int = 0) -> None:
    """Blocking entry point of ``tokenward mock-upstream``; with a capacity, the mock is a
    batching engine whose streams share it (mock/engine.py)."""
    sock = bind_socket(host, port)
    # Listening before saying so: a client that connects on reading the line is queued
    # by the kernel rather than refused while uvicorn is still starting (uvicorn's own
    # listen() on the socket later is harmless).
    sock.listen(2048)
    real_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    sys.stdout.write(f"mock-upstream listening on http://{shown}:{real_port}\n")
    sys.stdout.flush()
    engine = Engine(capacity_tokens_per_s, prefill_tokens_per_s, kv_tokens=kv_cache_tokens) \
        if capacity_tokens_per_s else None
    uvicorn.Server(_config(MockUpstream(engine=engine))).run(sockets=[sock])
