"""Everything a running gateway shares across requests, built once at start-up.

Stages get this object in their factory and keep what they need; nothing here is looked
up per request. Resources opened here are closed in reverse order at shutdown.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Awaitable, Callable

from .config.schema import Config
from .observe.decision_log import DecisionLog, open_decision_log
from .pipeline.order import STAGE_FACTORIES, STAGE_ORDER
from .pipeline.stage import Stage
from .upstream.health import UpstreamHealth
from .upstream.targets import TargetTable

log = logging.getLogger("tokenward")

BUILTIN_MOCK = "builtin:mock"


class Services:
    def __init__(self, config: Config, inherited: "Services | None" = None) -> None:
        self.config = config
        # The services this one replaces on a reload: stages take over what lives in the
        # process (the memory budget store, the memory cache) from them.
        self.inherited = inherited
        self.targets: TargetTable | None = None
        self.health: UpstreamHealth | None = None
        self.decisions: DecisionLog | None = None
        self.stages: list[Stage] = []
        # Set by stages' factories for others to use (keystore, budget store, ...).
        self.extras: dict[str, Any] = {}
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self.ready = False

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        self._closers.append(closer)

    async def start(self) -> None:
        urls = await self._resolve_upstreams()
        from .tokenize.registry import shared_registry

        self.targets = TargetTable(self.config, urls, shared_registry(self).counters)
        self.on_close(self.targets.aclose)
        self.health = UpstreamHealth(self.config, self.targets)
        self.decisions = open_decision_log(self.config.logging.decisions)
        self.stages = await self._build_stages()
        self._probe_stores()
        self.ready = True

    def _probe_stores(self) -> None:
        """/readyz probes the shared budget store (one cheap read), which every request needs."""
        admitter = self.extras.get("budget")
        store = admitter.shared.store if admitter is not None else None
        if store is not None and hasattr(store, "open_reservations") and admitter.shared.breaker is not None:
            key = f"{self.config.store.key_prefix}:readyz"
            self.health.add_store("budget_store", lambda: store.open_reservations(key))

    async def stop(self) -> None:
        self.ready = False
        while self._closers:
            closer = self._closers.pop()
            try:
                await closer()
            except Exception:
                log.exception("error while shutting down")
        if self.decisions is not None:
            self.decisions.close()

    async def _resolve_upstreams(self) -> dict[str, str]:
        urls: dict[str, str] = {}
        builtin = [name for name, up in self.config.upstreams.items() if up.base_url == BUILTIN_MOCK]
        if builtin:
            from .mock.server import start_mock, stop_mock

            server, port, mock_app = await start_mock("127.0.0.1", 0)
            self.extras["builtin_mock"] = mock_app   # its /_mock/* controls, served on the gateway's port (app.py)

            async def close_mock() -> None:
                await stop_mock(server)

            self.on_close(close_mock)
            for name in builtin:
                urls[name] = f"http://127.0.0.1:{port}/v1"
        return urls

    async def _build_stages(self) -> list[Stage]:
        stages = []
        for slot in STAGE_ORDER:
            spec = STAGE_FACTORIES.get(slot)
            if spec is None:
                continue
            module_name, factory_name = spec.split(":")
            factory = getattr(importlib.import_module(module_name), factory_name)
            try:
                stage = factory(self)
                if hasattr(stage, "__await__"):
                    stage = await stage
            except Exception as exc:
                _name_the_store(slot, self.config, exc)
                raise
            if stage is not None:
                stages.append(stage)
        return stages


def _name_the_store(slot: str, config: Config, exc: Exception) -> None:
    """A stage that opens a store failed to start: one line naming the store and its URL
    (without the password) and why, rather than a bare errno (config/stores.py)."""
    from .config.stores import StoreStartError, failure, opened_by
    from .errors import ConfigError

    store = opened_by(slot, config)
    if store is not None and not isinstance(exc, (ConfigError, StoreStartError)):
        raise StoreStartError(failure(store, exc)) from exc
