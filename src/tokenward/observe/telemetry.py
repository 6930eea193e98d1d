"""A gateway's metrics, and what a scrape of ``/metrics`` reads.

The Gateway (app.py) makes one ``Telemetry`` and hands it to every part that counts;
a reload's new Gateway takes over the old one's, so counters run on across a reload. Two
gateways in one process (tests, the lab) count apart: nothing here is module-level.

``Exposition`` is the registry a scrape reads: the request metrics, the work metrics,
and whatever a higher layer registers (control/metrics.py's enforcement metrics). Under
``tokenward serve --workers N`` each worker also answers for the others, through the
shared directory the parent made before forking (observe/shared_metrics.py).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from ..http.asgi import Send
from .metrics import GatewayMetrics
from .shared_metrics import WorkerMetrics
from .work import WorkMetrics

_TEXT = (b"content-type", b"text/plain; version=0.0.4; charset=utf-8")


class Exposition:
    def __init__(self, shared_dir: str | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.shared: WorkerMetrics | None = None
        if shared_dir is not None:
            self.shared = WorkerMetrics(shared_dir, self.registry)

    def register(self, collector: Any) -> None:
        self.registry.register(collector)

    async def start(self) -> None:
        """With several workers: listen for the others' scrapes (once; a reload finds it
        started)."""
        if self.shared is not None and not self.shared.started:
            await self.shared.start()

    async def send(self, send: Send) -> None:
        shared = self.shared
        body = await shared.exposition() if shared is not None else generate_latest(self.registry)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [_TEXT, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class Telemetry:
    __slots__ = ("requests", "work", "exposition")

    def __init__(self, shared_dir: str | None = None) -> None:
        self.requests = GatewayMetrics()      # decisions, stage times, tokens, screening, cache
        self.work = WorkMetrics()             # admitted and refused work, agent jobs
        self.exposition = Exposition(shared_dir)
        self.exposition.register(self.requests)
        self.exposition.register(self.work)
