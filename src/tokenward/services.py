"""Everything a running gateway shares across requests, built once at start-up.

The gateway's parts are assembled here, in one place: the clock, the upstream table, the
decision log, then each stage in the declared order (stages/order.py), each builder
handed this object and keeping what it needs. What one stage builds and another part
uses (the key service, the budget admitter, the admin API...) is a typed attribute here,
never a string-keyed lookup. Nothing here is looked up per request. Resources opened
here are closed in reverse order at shutdown.

A test builds a gateway with its own clock and stages through the same constructor:
``Gateway(config, clock=fake, stages=order.replaced("screening", build_refuser))``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Sequence

from .config.schema import Config
from .control.metrics import EnforcementMetrics
from .observe.decision_log import DecisionLog, open_decision_log
from .observe.telemetry import Telemetry
from .pipeline.stage import Stage
from .stages import order
from .upstream.health import UpstreamHealth
from .upstream.targets import TargetTable

if TYPE_CHECKING:
    from .abuse.engine import AbuseEngine
    from .abuse.store import SignalStore
    from .admin import AdminApi
    from .assemble.identity import IdentityParts
    from .budget.admission import Admitter
    from .control.runtime import ControlRuntime
    from .control.service import ControlOps
    from .jobs.book import JobBook
    from .keys.service import KeyService
    from .keys.store import KeyStore
    from .stages.s85_cache import CacheStage
    from .tokenize.registry import TokenizerRegistry

log = logging.getLogger("tokenward")

BUILTIN_MOCK = "builtin:mock"


class Services:
    def __init__(self, config: Config, inherited: "Services | None" = None,
                 clock: Callable[[], float] | None = None,
                 stages: Sequence[tuple[str, order.Builder]] | None = None,
                 telemetry: Telemetry | None = None,
                 transports: Mapping[str, Any] | None = None) -> None:
        self.config = config
        # an upstream's transport when it is not HTTP over TCP (upstream/memory.py), by name
        self.transports = transports
        # The services this one replaces on a reload: stages take over what lives in the
        # process (the memory budget store, the memory cache) from them.
        self.inherited = inherited
        # wall-clock seconds for budgets, leases and controls; tests pass a fake one
        self.clock: Callable[[], float] = clock if clock is not None else time.time
        self._builders = tuple(stages) if stages is not None else order.STAGES
        # This gateway's metrics (a reload's services keep the ones they replace): every part
        # that counts is handed them here, none reaches for a module-level registry.
        if telemetry is None:
            telemetry = inherited.telemetry if inherited is not None else Telemetry()
        self.telemetry: Telemetry = telemetry
        self.metrics = telemetry.requests
        self.work = telemetry.work
        self.enforcement: EnforcementMetrics
        if inherited is not None:
            self.enforcement = inherited.enforcement
        else:
            self.enforcement = EnforcementMetrics()
            telemetry.exposition.register(self.enforcement)
        self.enforcement.services = self   # the budget store's breaker a scrape reports
        self.targets: TargetTable | None = None
        self.health: UpstreamHealth | None = None
        self.decisions: DecisionLog | None = None
        self.stages: list[Stage] = []
        # Built by one stage's builder and used by other parts (set during start()):
        self.tokenizers: TokenizerRegistry | None = None
        self.keystore: KeyStore | None = None
        self.keys: KeyService | None = None
        self.identity: IdentityParts | None = None
        self.admin: AdminApi | None = None            # only with admin.token_env set
        self.budget: Admitter | None = None
        self.jobs: JobBook | None = None
        self.cache: CacheStage | None = None          # only with a cache section
        self.control: ControlRuntime | None = None
        self.control_ops: ControlOps | None = None
        self.signal_store: SignalStore | None = None
        self.abuse: AbuseEngine | None = None         # only with abuse signals configured
        # the abuse signals' share of each decision record (abuse/observe.py)
        self.observe: Callable[[Any], None] | None = None
        # without abuse signals: the status page's per-tenant screening counts (control/status.py)
        self.status_tally: Callable[[Any], None] | None = None
        # the built-in mock's ASGI app, whose /_mock/* controls the gateway serves (app.py)
        self.builtin_mock: Callable[..., Awaitable[None]] | None = None
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self.ready = False

    @property
    def stage_names(self) -> frozenset[str]:
        """The stages this gateway is built with (stages/order.py names)."""
        return frozenset(slot for slot, _ in self._builders)

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        self._closers.append(closer)

    async def start(self) -> None:
        urls = await self._resolve_upstreams()
        from .tokenize.registry import shared_registry

        self.targets = TargetTable(self.config, urls, shared_registry(self).counters, self.metrics,
                                   self.transports)
        self.on_close(self.targets.aclose)
        self.health = UpstreamHealth(self.config, self.targets)
        self.health.start()   # a pool of several targets is probed in the background
        self.on_close(self.health.aclose)
        self.decisions = open_decision_log(self.config.logging.decisions)
        self.stages = await self._build_stages()
        self._probe_stores()
        self.ready = True

    def _probe_stores(self) -> None:
        """/readyz probes the shared budget store (one cheap read), which every request needs."""
        admitter, health = self.budget, self.health
        if admitter is None or health is None:
            return
        shared = admitter.shared
        if hasattr(shared.store, "open_reservations") and shared.breaker is not None:
            key = f"{self.config.store.key_prefix}:readyz"

            async def probe() -> int:
                # its outcome moves tokenward_budget_store_up too (budget/guard.py StoreHealth)
                try:
                    answer = await shared.store.open_reservations(key)
                except asyncio.CancelledError:   # /readyz's deadline passed (upstream/health.py)
                    shared.health.failed("no answer to /readyz's probe in time")
                    raise
                except Exception as exc:
                    shared.health.failed(exc)
                    raise
                shared.health.answered()
                return answer

            health.add_store("budget_store", probe)

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
            self.builtin_mock = mock_app   # its /_mock/* controls, served on the gateway's port (app.py)

            async def close_mock() -> None:
                await stop_mock(server)

            self.on_close(close_mock)
            for name in builtin:
                urls[name] = f"http://127.0.0.1:{port}/v1"
        return urls

    async def _build_stages(self) -> list[Stage]:
        stages: list[Stage] = []
        for slot, build in self._builders:
            try:
                built = build(self)
                stage = await built if inspect.isawaitable(built) else built
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
