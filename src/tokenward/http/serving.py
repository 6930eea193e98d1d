"""Running an ASGI app on ``server.py``'s protocol: lifespan, sockets, idle sweep, graceful stop.

``HttpServer`` lives inside a running event loop (tests embed it); ``run`` is a worker
process's whole life: uvloop, start-up, serve until SIGTERM/SIGINT, drain, shut down.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import socket
import ssl
from typing import Any, Awaitable, Callable

from .asgi import ASGIApp, Message, ReloadableApp
from .limits import ClientLimits
from .server import HttpConnection
from .state import MAX_HEAD_BYTES, MAX_HEADER_BYTES, MAX_HEADERS, ServerState

log = logging.getLogger("tokenward.http")

SWEEP_S = 1.0


class StartupFailed(Exception):
    pass


class _Lifespan:
    """The ASGI lifespan protocol, from the server's side."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._outbox: asyncio.Queue[Message] = asyncio.Queue()
        self._task: asyncio.Future[None] | None = None

    async def _exchange(self, kind: str) -> Message:
        await self._inbox.put({"type": f"lifespan.{kind}"})
        reply = asyncio.ensure_future(self._outbox.get())
        assert self._task is not None
        either: set[asyncio.Future[Any]] = {reply, self._task}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if reply.done():
            return reply.result()
        reply.cancel()
        exc = self._task.exception()
        return {"type": f"lifespan.{kind}.failed", "message": repr(exc) if exc else "the application returned"}

    async def startup(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        self._task = asyncio.ensure_future(self._app(scope, self._inbox.get, self._outbox.put))
        reply = await self._exchange("startup")
        if reply["type"] != "lifespan.startup.complete":
            raise StartupFailed(reply.get("message", "start-up failed"))

    async def shutdown(self) -> None:
        if self._task is None or self._task.done():
            return
        reply = await self._exchange("shutdown")
        if reply["type"] != "lifespan.shutdown.complete":
            log.error("shutdown failed: %s", reply.get("message", ""))


class HttpServer:
    def __init__(self, app: ASGIApp, keep_alive_s: float = 30.0, graceful_s: float = 30.0,
                 max_head_bytes: int = MAX_HEAD_BYTES, max_connections: int | None = None,
                 max_header_bytes: int = MAX_HEADER_BYTES, max_headers: int = MAX_HEADERS,
                 limits: ClientLimits | None = None) -> None:
        self.app = app
        # The slow-client limits: given (``tokenward serve``: the config's ``server:``), or the defaults.
        self.limits = limits if limits is not None else ClientLimits()
        self.max_head_bytes = max_head_bytes
        self.head_limits = (max_header_bytes, max_headers)
        self.max_connections = max_connections
        self.keep_alive_s = keep_alive_s
        self.graceful_s = graceful_s
        self.state: ServerState | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._lifespan = _Lifespan(app)
        self._sweeper: asyncio.TimerHandle | None = None

    async def start(self, sockets: list[socket.socket], ssl_context: ssl.SSLContext | None = None) -> None:
        """Run the app's start-up, then accept on ``sockets`` (TLS with ``ssl_context``);
        raises StartupFailed."""
        loop = asyncio.get_running_loop()
        await self._lifespan.startup()
        self.state = ServerState(self.app, loop, self.keep_alive_s, self.max_head_bytes, self.max_connections,
                                 *self.head_limits, limits=self.limits)
        factory = functools.partial(HttpConnection, self.state)   # one connection object per socket
        for sock in sockets:
            self._servers.append(await loop.create_server(factory, sock=sock, backlog=2048, ssl=ssl_context))
        self._sweeper = loop.call_later(SWEEP_S, self._sweep)

    async def swap(self, app: ASGIApp) -> ASGIApp:
        """Start ``app`` and serve every request from now on with it, on open connections
        too; the old app finishes the requests it has (streams included), then shuts down
        (in the background, so this returns once the new app serves). Returns the old app.
        Raises StartupFailed, and the old app keeps serving, if the new one does not start."""
        lifespan = _Lifespan(app)
        await lifespan.startup()
        assert self.state is not None
        old, old_lifespan = self.state.app, self._lifespan
        self.app = self.state.app = app
        self._lifespan = lifespan
        task = asyncio.ensure_future(self._retire(old, old_lifespan))
        self.state.tasks.add(task)
        task.add_done_callback(self.state.tasks.discard)
        return old

    async def _retire(self, app: ASGIApp, lifespan: _Lifespan) -> None:
        """Wait until the old app has no request left (or the grace period ends), then shut it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.graceful_s
        while getattr(app, "active", 0) > 0 and loop.time() < deadline:
            await asyncio.sleep(0.05)
        await lifespan.shutdown()

    def _sweep(self) -> None:
        state = self.state
        if state is None:
            return
        state.sweep_idle()
        self._sweeper = state.loop.call_later(SWEEP_S, self._sweep)

    async def stop(self, graceful: bool = True) -> None:
        """Stop accepting; let open requests finish (up to ``graceful_s``), then shut down."""
        state = self.state
        if self._sweeper is not None:
            self._sweeper.cancel()
        for server in self._servers:
            server.close()
        if state is not None:
            state.draining = True
            for conn in list(state.connections):
                if graceful:
                    conn.close_when_idle()
                else:
                    conn.transport.abort()
            if state.tasks and graceful:
                await asyncio.wait(set(state.tasks), timeout=self.graceful_s)
            for task in list(state.tasks):
                task.cancel()
            if state.tasks:
                await asyncio.wait(set(state.tasks), timeout=5)
            for conn in list(state.connections):
                conn.transport.abort()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
        await self._lifespan.shutdown()


def run(app: ReloadableApp, sockets: list[socket.socket], keep_alive_s: float = 30.0, graceful_s: float = 30.0,
        max_head_bytes: int = MAX_HEAD_BYTES, max_connections: int | None = None,
        max_header_bytes: int = MAX_HEADER_BYTES, max_headers: int = MAX_HEADERS,
        started: Callable[[str | None], None] | None = None, ssl_context: ssl.SSLContext | None = None,
        reload: Callable[[HttpServer], Awaitable[str]] | None = None, hook_reload: bool = True,
        limits: ClientLimits | None = None) -> bool:
    """Serve until SIGTERM or SIGINT; False if the app failed to start. ``started`` hears how
    start-up ended: None once the app started and the sockets accept, else the reason (then
    the caller reports it, so it is not logged here: a failed start is one line, once).
    ``reload``, if given, runs on SIGHUP (one at a time); its result or failure is logged;
    with ``hook_reload`` it is also the app's ``reload_hook`` (POST /admin/reload)."""
    import uvloop

    async def main() -> bool:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        server = HttpServer(app, keep_alive_s, graceful_s, max_head_bytes, max_connections, max_header_bytes,
                            max_headers, limits)
        if reload is not None:
            _on_hangup(loop, server, reload)
            if hook_reload:
                async def reload_now() -> str:
                    return await reload(server)
                app.reload_hook = reload_now
        try:
            await server.start(sockets, ssl_context)
        except StartupFailed as exc:
            if started is None:
                log.error("start-up failed: %s", exc)
            else:
                started(str(exc) or "start-up failed")
            await server.stop(graceful=False)
            return False
        if started is not None:
            started(None)
        await stop.wait()
        await server.stop()
        return True

    return uvloop.run(main())


def _on_hangup(loop: asyncio.AbstractEventLoop, server: HttpServer,
               reload: Callable[[HttpServer], Awaitable[str]]) -> None:
    running: list[asyncio.Future[None]] = []

    async def one() -> None:
        try:
            log.info("config reloaded: %s", await reload(server))
        except Exception as exc:  # the old config keeps serving; the operator reads why
            log.error("config reload refused, the running config keeps serving: %s", exc)

    def hangup() -> None:
        if running and not running[0].done():
            log.warning("config reload already in progress")
            return
        running[:] = [asyncio.ensure_future(one())]

    loop.add_signal_handler(signal.SIGHUP, hangup)
