"""Start-up of enforcement: the signal store, the controls (repo, runtime, operations), the
abuse engine when ``abuse:`` is configured, the admin routes and the metrics.

Runs once, from the control stage's factory (after identity: the key store and the admin
API exist by then); everything opened is closed through ``services.on_close``.
"""

from __future__ import annotations

import logging
from typing import Any

from ..keys.invalidate import is_redis_url
from ..control.repo import ControlRepo
from ..control.runtime import ControlRuntime
from ..control.service import ControlOps

log = logging.getLogger("tokenward.control")


def open_signal_store(config, inherited: Any = None):
    """Redis when the budget store is Redis (a connection of its own), else this process's
    memory (kept across a config reload, as the memory budget store is)."""
    from ..abuse.store import MemorySignalStore

    url = config.store.url
    if is_redis_url(url):
        from ..abuse.redis_store import RedisSignalStore
        from ..budget.redis import RedisStore

        return RedisSignalStore(RedisStore(url, max(config.store.timeout_ms / 1000, 1.0), config.store.client),
                                config.store.key_prefix)
    previous = inherited.signal_store if inherited is not None else None
    return previous if isinstance(previous, MemorySignalStore) else MemorySignalStore()


async def _repo(services, clock) -> ControlRepo:
    keystore = services.keystore
    if keystore is None:   # no identity stage: open the configured key store's database ourselves
        from ..keys.store import open_keystore

        keystore = await open_keystore(services.config.keystore.url)
        services.on_close(keystore.close)
    repo = ControlRepo(keystore.engine, clock)
    await repo.create_table()
    return repo


async def open_control(services) -> ControlRuntime:
    config = services.config
    clock = services.clock
    store = open_signal_store(config, getattr(services, "inherited", None))
    services.signal_store = store
    if store.name != "memory":
        services.on_close(store.close)
    repo = await _repo(services, clock)
    runtime = ControlRuntime(repo, config.control, store, config.store.url if is_redis_url(config.store.url) else None,
                             clock, services.metrics.open_streams)
    await runtime.start()
    services.on_close(runtime.close)
    ops = ControlOps(repo, runtime.announce, frozenset(config.tenants), frozenset(config.models),
                     config.abuse.appeal_grace_s if config.abuse is not None else 0.0)
    services.control = runtime
    services.control_ops = ops
    services.enforcement.runtime = runtime
    if config.abuse is not None:
        from ..abuse.engine import AbuseEngine

        engine = AbuseEngine(config, store, ops, runtime, clock, services.enforcement)
        await engine.start()
        services.on_close(engine.close)
        services.abuse = engine
        services.observe = engine.observer
        services.enforcement.engine = engine
    admin = services.admin
    if admin is not None:
        from ..control.admin import mount

        mount(admin, services)
    return runtime
