"""The gateway assembled, once, from its config: ``assemble`` builds every part from what it
depends on and returns them as ``Parts``, immutable after.

The order: what every stage may stand on (the clock, the metrics, the tokenizers, the
upstream table, the decision log), then each stage in the declared order (stages/order.py).
A builder's parameters name what it is built from, and it is handed exactly those: a value
built above, or a part that opens something (assemble/providers.py: the key store, the
identity parts, the budget admitter, the control runtime...), opened on the first builder
that names it. A gateway built without the identity stage never opens an authenticator.
Then the parts no stage serves (the admin API, the status page, the abuse engine), and the
check that every stage's needs are written by an earlier stage; a gateway that fails any of
this does not start, and what it had opened is closed.

A test or bench builds a gateway with its own clock and stages through the same function:
``Gateway(config, clock=fake, stages=order.replaced("screening", build_refuser))``.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
import time
from typing import Any, Awaitable, Callable, Mapping, Sequence, TypedDict, TypeVar, cast, get_type_hints

from ..abuse.engine import AbuseEngine
from ..abuse.store import SignalStore
from ..admin import AdminApi
from ..budget.admission import Admitter
from ..budget.store import BudgetStore
from ..config.schema import BUILTIN_MOCK, Config
from ..config.stores import StoreStartError, failure, opened_by
from ..control.metrics import EnforcementMetrics
from ..control.repo import ControlRepo
from ..control.runtime import ControlRuntime
from ..control.service import ControlOps
from ..errors import ConfigError
from ..mock.app import MockUpstream
from ..identity.parts import IdentityParts
from ..jobs.book import JobBook
from ..keys.service import KeyService
from ..keys.sql import SqlKeyStore
from ..observe.decision_log import DecisionLog, open_decision_log
from ..observe.metrics import GatewayMetrics
from ..observe.telemetry import Telemetry
from ..observe.work import WorkMetrics
from ..pipeline.closers import Closers
from ..pipeline.context import RequestContext
from ..pipeline.stage import Stage
from ..stages import order
from ..stages.s14_cache import CacheStage
from ..tokenize.registry import TokenizerRegistry
from ..upstream.health import UpstreamHealth
from ..upstream.targets import TargetTable
from .providers import PROVIDERS

log = logging.getLogger("tokenward")

Clock = Callable[[], float]
T = TypeVar("T")


class AssemblyError(ConfigError):
    """A gateway that cannot be built as asked: the message names what is missing."""

    def __init__(self, message: str) -> None:
        super().__init__("stages", message)


class Available(TypedDict):
    """Every name a builder or provider may ask for, with its type (tests/unit/test_assembly.py
    holds every builder's and provider's parameters to these)."""

    config: Config
    clock: Clock
    telemetry: Telemetry
    metrics: GatewayMetrics
    work_metrics: WorkMetrics
    enforcement: EnforcementMetrics
    targets: TargetTable
    tokenizers: TokenizerRegistry
    closers: Closers
    stage_names: frozenset[str]
    # what a reload takes over from the gateway it replaces (None on a first start)
    previous_budget_store: BudgetStore | None
    previous_cache: CacheStage | None
    previous_signal_store: SignalStore | None
    # opened on demand (assemble/providers.py)
    keystore: SqlKeyStore
    identity: IdentityParts
    admitter: Admitter
    jobs: JobBook
    signal_store: SignalStore
    control_repo: ControlRepo
    control_runtime: ControlRuntime
    control_ops: ControlOps
    abuse: AbuseEngine | None


@dataclasses.dataclass(frozen=True, slots=True)
class Parts:
    """A started gateway's parts. Frozen: nothing is swapped in after assembly."""

    config: Config
    clock: Clock
    telemetry: Telemetry
    enforcement: EnforcementMetrics
    tokenizers: TokenizerRegistry
    targets: TargetTable
    health: UpstreamHealth
    decisions: DecisionLog
    stages: tuple[Stage, ...]
    closers: Closers
    keystore: SqlKeyStore | None = None
    keys: KeyService | None = None
    identity: IdentityParts | None = None
    admin: AdminApi | None = None             # only with admin.token_env set (and the identity stage)
    budget: Admitter | None = None
    jobs: JobBook | None = None
    cache: CacheStage | None = None           # only with a cache section
    control: ControlRuntime | None = None
    control_ops: ControlOps | None = None
    signal_store: SignalStore | None = None
    abuse: AbuseEngine | None = None          # only with abuse signals configured
    # each decision's share for the abuse signals (abuse/observe.py), else the status page's
    # per-tenant screening counts (control/status.py), else None
    observe: Callable[[RequestContext], None] | None = None
    # the built-in mock's ASGI app, whose /_mock/* controls the gateway serves
    builtin_mock: MockUpstream | None = None

    @property
    def metrics(self) -> GatewayMetrics:
        return self.telemetry.requests

    @property
    def work(self) -> WorkMetrics:
        return self.telemetry.work

    @property
    def stage_names(self) -> frozenset[str]:
        return frozenset(stage.name for stage in self.stages)

    async def stop(self) -> None:
        await self.closers.close_all()


class _Assembly:
    """What has been built so far; a builder's parameters are looked up here by name."""

    def __init__(self, config: Config, values: dict[str, object]) -> None:
        self.config = config
        self.values = values
        self._opening: list[str] = []

    def part(self, name: str, kind: type[T]) -> T | None:
        """An opened part, by name and type; None when nothing asked for it."""
        value = self.values.get(name)
        if value is None:
            return None
        if not isinstance(value, kind):
            raise AssemblyError(f"{name!r} was built as {type(value).__name__}, not {kind.__name__}")
        return value

    def opened(self, name: str) -> bool:
        return name in self.values

    async def get(self, name: str, asker: str) -> object:
        if name in self.values:
            return self.values[name]
        provider = PROVIDERS.get(name)
        if provider is None:
            raise AssemblyError(f"{asker} is built from {name!r}, which nothing in the gateway provides "
                                f"(the names a builder may take: {', '.join(Available.__annotations__)})")
        if name in self._opening:
            raise AssemblyError(f"{name!r} depends on itself: {' -> '.join([*self._opening, name])}")
        self._opening.append(name)
        try:
            value = await self.call(provider, name)
        finally:
            self._opening.pop()
        self.values[name] = value
        return value

    async def call(self, build: Callable[..., Any], asker: str) -> Any:
        kwargs = {name: await self.get(name, asker) for name in _parameters(build)}
        try:
            built = build(**kwargs)
            return await built if inspect.isawaitable(built) else built
        except Exception as exc:
            _name_the_store(asker, self.config, exc)
            raise


def _parameters(build: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(build).parameters)


async def assemble(config: Config, *, clock: Clock | None = None, telemetry: Telemetry,
                   stages: Sequence[tuple[str, order.Builder]] = order.STAGES,
                   inherited: Parts | None = None, transports: Mapping[str, Any] | None = None,
                   reload: Callable[[], Awaitable[Any]] | None = None) -> Parts:
    """Every part of a gateway, built and started; on any failure what was opened is closed."""
    closers = Closers()
    try:
        return await _assemble(config, clock or time.time, telemetry, stages, inherited, transports, reload, closers)
    except BaseException:
        await closers.close_all()
        raise


async def _assemble(config: Config, clock: Clock, telemetry: Telemetry,
                    stages: Sequence[tuple[str, order.Builder]], inherited: Parts | None,
                    transports: Mapping[str, Any] | None, reload: Callable[[], Awaitable[Any]] | None,
                    closers: Closers) -> Parts:
    mock, urls = await _builtin_mock(config, closers)
    tokenizers = TokenizerRegistry(config)
    targets = TargetTable(config, urls, tokenizers.counters, telemetry.requests, transports)
    closers.add(targets.aclose)
    health = UpstreamHealth(config, targets)
    decisions = open_decision_log(config.logging.decisions)
    closers.add(_closing(decisions))
    enforcement = inherited.enforcement if inherited is not None else EnforcementMetrics()
    if inherited is None:
        telemetry.exposition.register(enforcement)
    assembly = _Assembly(config, {
        "config": config, "clock": clock, "telemetry": telemetry, "metrics": telemetry.requests,
        "work_metrics": telemetry.work, "enforcement": enforcement, "targets": targets, "tokenizers": tokenizers,
        "closers": closers, "stage_names": frozenset(slot for slot, _ in stages), **_previous(inherited),
    })
    built: list[Stage] = []
    for slot, build in stages:
        stage = await assembly.call(build, f"stage {slot!r}")
        if stage is not None:
            built.append(stage)
    check_needs(built)
    return await _finish(config, clock, telemetry, enforcement, tokenizers, targets, health, decisions,
                         tuple(built), closers, assembly, mock, reload)


async def _finish(config: Config, clock: Clock, telemetry: Telemetry, enforcement: EnforcementMetrics,
                  tokenizers: TokenizerRegistry, targets: TargetTable, health: UpstreamHealth,
                  decisions: DecisionLog, stages: tuple[Stage, ...], closers: Closers, assembly: _Assembly,
                  mock: MockUpstream | None, reload: Callable[[], Awaitable[Any]] | None) -> Parts:
    """The parts no stage serves, from what the stages were built with."""
    identity = assembly.part("identity", IdentityParts)
    admitter = assembly.part("admitter", Admitter)
    runtime = assembly.part("control_runtime", ControlRuntime)
    abuse: AbuseEngine | None = None
    ops: ControlOps | None = None
    if runtime is not None:   # the control stage: its operations, and the abuse engine when configured
        await assembly.get("control_ops", "the operator controls")
        await assembly.get("abuse", "the abuse signals")
        ops, abuse = assembly.part("control_ops", ControlOps), assembly.part("abuse", AbuseEngine)
        enforcement.runtime = runtime
        enforcement.engine = abuse
    cache = next((stage for stage in stages if isinstance(stage, CacheStage)), None)
    # a Protocol (memory or Redis): typed by the provider that built it
    signal_store = cast("SignalStore | None", assembly.values.get("signal_store"))
    keys = identity.keys if identity is not None else None
    admin = _admin_api(config, keys, reload)
    observe: Callable[[RequestContext], None] | None = abuse.observer if abuse is not None else None
    if admin is not None:
        if cache is not None:
            admin.tenant_action("cache/purge", cache.purge, "drop the tenant's cached answers")
        if runtime is not None and ops is not None:
            from ..control.admin import mount

            page = mount(admin, config, runtime, ops, enforcement, telemetry, keys, admitter,
                         signal_store if abuse is not None else None)
            if observe is None:
                observe = page.tally
    if admitter is not None:
        _probe_store(config, admitter, health)
    return Parts(config=config, clock=clock, telemetry=telemetry, enforcement=enforcement, tokenizers=tokenizers,
                 targets=targets, health=health, decisions=decisions, stages=stages, closers=closers,
                 keystore=assembly.part("keystore", SqlKeyStore), keys=keys, identity=identity, admin=admin,
                 budget=admitter, jobs=assembly.part("jobs", JobBook), cache=cache, control=runtime, control_ops=ops,
                 signal_store=signal_store, abuse=abuse, observe=observe, builtin_mock=mock)


def check_needs(stages: Sequence[Stage]) -> None:
    """Refuse an order in which a stage needs a context slot no earlier stage writes."""
    written: set[str] = set()
    for stage in stages:
        missing = stage.needs - written
        if missing:
            raise AssemblyError(_missing(f"stage {stage.name!r}", missing))
        written |= stage.writes
    missing = order.FORWARD_NEEDS - written
    if missing:
        raise AssemblyError(_missing("the forward step", missing))


def _missing(who: str, slots: frozenset[str] | set[str]) -> str:
    named = "; ".join(f"ctx.{slot}, written by the stage {order.SLOT_WRITERS.get(slot, '?')!r}" for slot in sorted(slots))
    return f"{who} needs {named}, which this gateway does not run before it (stages/order.py)"


def _previous(inherited: Parts | None) -> dict[str, object]:
    """What a reload takes over from the gateway it replaces: the memory stores' state."""
    if inherited is None:
        return {"previous_budget_store": None, "previous_cache": None, "previous_signal_store": None}
    budget = inherited.budget
    memory = inherited.config.store.url == "memory"
    return {"previous_budget_store": budget.shared.store if budget is not None and memory else None,
            "previous_cache": inherited.cache, "previous_signal_store": inherited.signal_store}


def _admin_api(config: Config, keys: KeyService | None,
               reload: Callable[[], Awaitable[Any]] | None) -> AdminApi | None:
    env = config.admin.token_env
    if env is None or keys is None:
        return None
    token = os.environ.get(env, "")
    if not token:
        log.warning("admin API disabled: env var %s (admin.token_env) is not set", env)
        return None
    admin = AdminApi(keys, token, config)
    if reload is not None:
        admin.action("reload", reload, "reload the config file (every worker)")
    return admin


def _probe_store(config: Config, admitter: Admitter, health: UpstreamHealth) -> None:
    """/readyz probes the shared budget store (one cheap read), which every request needs."""
    import asyncio

    shared = admitter.shared
    if shared.breaker is None:   # the memory store is always up
        return
    key = f"{config.store.key_prefix}:readyz"

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


async def _builtin_mock(config: Config, closers: Closers) -> tuple[MockUpstream | None, dict[str, str]]:
    """The quickstart's in-process mock backend, when an upstream's base_url is builtin:mock."""
    builtin = [name for name, up in config.upstreams.items() if up.base_url == BUILTIN_MOCK]
    if not builtin:
        return None, {}
    from ..mock.server import start_mock, stop_mock

    server, port, mock_app = await start_mock("127.0.0.1", 0)

    async def close_mock() -> None:
        await stop_mock(server)

    closers.add(close_mock)
    return mock_app, {name: f"http://127.0.0.1:{port}/v1" for name in builtin}


def _closing(decisions: DecisionLog) -> Callable[[], Awaitable[None]]:
    async def close() -> None:
        decisions.close()
    return close


def _name_the_store(asker: str, config: Config, exc: Exception) -> None:
    """A part that opens a store failed to start: one line naming the store and its URL
    (without the password) and why, rather than a bare errno (config/stores.py)."""
    store = opened_by(asker.removeprefix("stage ").strip("'"), config)
    if store is not None and not isinstance(exc, (ConfigError, StoreStartError)):
        raise StoreStartError(failure(store, exc)) from exc


def available_types() -> dict[str, Any]:
    """``Available``'s names with their types resolved (tests compare builders' parameters)."""
    return get_type_hints(Available)
