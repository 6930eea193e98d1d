"""The parts stages stand on that open something: each opened once, on the first builder that
asks for it by name (assemble/gateway.py), and closed through ``closers`` at shutdown.

A provider is a function whose parameters name what it needs, like a stage's builder: the
assembly hands it exactly those, opening them first if they are providers too. A gateway
built without the identity stage opens no authenticator; one built without the control
stage no control runtime. ``PROVIDERS`` maps each name to its provider; the names and their
types are ``gateway.Available``'s (tests/unit/test_assembly.py holds every signature to it).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Callable

from ..abuse.store import MemorySignalStore, SignalStore
from ..budget.admission import Admitter
from ..budget.store import BudgetStore
from ..config.schema import Config, DemoConfig
from ..control.metrics import EnforcementMetrics
from ..control.repo import ControlRepo
from ..control.runtime import ControlRuntime
from ..control.service import ControlOps
from ..identity.apikeys import ApiKeyAuthenticator
from ..identity.parts import IdentityParts, tenant_plans
from ..jobs.book import JobBook
from ..keys.invalidate import RedisInvalidation, is_redis_url
from ..keys.last_used import LastUsedBatcher
from ..keys.service import KeyService
from ..keys.sql import SqlKeyStore
from ..keys.store import open_keystore
from ..observe.metrics import GatewayMetrics
from ..observe.work import WorkMetrics
from ..pipeline.closers import Closers
from ..budget.opening import open_store

log = logging.getLogger("tokenward")

Clock = Callable[[], float]


async def keystore(config: Config, closers: Closers) -> SqlKeyStore:
    store = await open_keystore(config.keystore.url)
    closers.add(store.close)
    return store


async def identity(config: Config, closers: Closers, keystore: SqlKeyStore) -> IdentityParts:
    """The key service, the API-key authenticator over a short cache, and (with a Redis budget
    store) the invalidation every replica's cache listens to; the demo key when configured."""
    plans = tenant_plans(config)
    batcher = LastUsedBatcher(keystore.touch, config.keystore.last_used_flush_s)
    batcher.start()
    closers.add(batcher.close)
    authenticator = ApiKeyAuthenticator(keystore, plans, config.keystore.cache_ttl_s, config.keystore.environment,
                                        batcher)
    invalidation = None
    if is_redis_url(config.store.url):
        cache = authenticator.cache
        invalidation = RedisInvalidation(config.store.url, cache.invalidate, cache.set_invalidation_live)
        await invalidation.start()
        closers.add(invalidation.close)

    async def announce(key_id: str) -> None:
        authenticator.cache.invalidate(key_id)
        if invalidation is not None:
            await invalidation.publish(key_id)

    keys = KeyService(keystore, announce)
    if config.demo is not None:
        await _demo_key(config.demo, keys)
    return IdentityParts(keystore, keys, authenticator, invalidation, batcher, plans)


async def _demo_key(demo: DemoConfig, keys: KeyService) -> None:
    plaintext, _ = await keys.create(demo.tenant, name="demo", reason="demo mode start-up", reviewer="tokenward")
    if demo.print_key:
        sys.stdout.write(f"demo key: {plaintext}\n")
        sys.stdout.flush()


async def admitter(config: Config, clock: Clock, closers: Closers,
                   previous_budget_store: BudgetStore | None) -> Admitter:
    """The budget admitter over the configured store; on a reload with the memory store, the
    replaced gateway's store (its buckets and open reservations are the process's state)."""
    reused = previous_budget_store if config.store.url == "memory" else None
    admitting = Admitter(config, reused or open_store(config), clock=clock)
    closers.add(admitting.close)
    admitting.keeper.start()
    await admitting.warm()
    return admitting


def jobs(admitter: Admitter, work_metrics: WorkMetrics) -> JobBook:
    return JobBook(admitter, work_metrics)


def signal_store(config: Config, closers: Closers, previous_signal_store: SignalStore | None) -> SignalStore:
    """Redis when the budget store is Redis (a connection of its own), else this process's
    memory (kept across a config reload, as the memory budget store is)."""
    url = config.store.url
    if is_redis_url(url):
        from ..abuse.redis_store import RedisSignalStore
        from ..budget.redis import RedisStore

        store = RedisSignalStore(RedisStore(url, max(config.store.timeout_ms / 1000, 1.0), config.store.client),
                                 config.store.key_prefix)
        closers.add(store.close)
        return store
    previous = previous_signal_store
    return previous if isinstance(previous, MemorySignalStore) else MemorySignalStore()


async def control_repo(clock: Clock, keystore: SqlKeyStore) -> ControlRepo:
    """The controls' table, in the key store's database."""
    repo = ControlRepo(keystore.engine, clock)
    await repo.create_table()
    return repo


async def control_runtime(config: Config, clock: Clock, closers: Closers, metrics: GatewayMetrics,
                          control_repo: ControlRepo, signal_store: SignalStore) -> ControlRuntime:
    redis_url = config.store.url if is_redis_url(config.store.url) else None
    runtime = ControlRuntime(control_repo, config.control, signal_store, redis_url, clock, metrics.open_streams)
    await runtime.start()
    closers.add(runtime.close)
    return runtime


def control_ops(config: Config, control_repo: ControlRepo, control_runtime: ControlRuntime) -> ControlOps:
    return ControlOps(control_repo, control_runtime.announce, frozenset(config.tenants), frozenset(config.models),
                      config.abuse.appeal_grace_s if config.abuse is not None else 0.0)


async def abuse(config: Config, clock: Clock, closers: Closers, enforcement: EnforcementMetrics,
                signal_store: SignalStore, control_ops: ControlOps, control_runtime: ControlRuntime) -> Any:
    """The abuse engine (abuse/engine.py) when ``abuse:`` is configured, else None."""
    if config.abuse is None:
        return None
    from ..abuse.engine import AbuseEngine

    engine = AbuseEngine(config, signal_store, control_ops, control_runtime, clock, enforcement)
    await engine.start()
    closers.add(engine.close)
    return engine


PROVIDERS: dict[str, Callable[..., Any]] = {
    "keystore": keystore,
    "identity": identity,
    "admitter": admitter,
    "jobs": jobs,
    "signal_store": signal_store,
    "control_repo": control_repo,
    "control_runtime": control_runtime,
    "control_ops": control_ops,
    "abuse": abuse,
}
