"""Start-up wiring of identity: key store, cache, invalidation, last-used batching, admin API, demo key.

Everything here runs once, in the services' start-up; resources are closed through
``services.on_close`` in reverse order (so last-used times are flushed before the store
closes).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from ..config.loader import effective_plan
from ..config.schema import Config, DemoConfig, PlanConfig
from ..keys.invalidate import RedisInvalidation, is_redis_url
from ..keys.last_used import LastUsedBatcher
from ..keys.service import KeyService
from ..keys.store import KeyStore, open_keystore
from ..identity.apikeys import ApiKeyAuthenticator

log = logging.getLogger("tokenward.identity")


def tenant_plans(config: Config) -> dict[str, tuple[str, PlanConfig]]:
    """Each tenant's plan name and effective plan, computed once at start-up."""
    return {tenant: (spec.plan, effective_plan(config, tenant)) for tenant, spec in config.tenants.items()}


class IdentityParts:
    __slots__ = ("store", "keys", "authenticator", "invalidation", "batcher")

    def __init__(self, store: KeyStore, keys: KeyService, authenticator: ApiKeyAuthenticator,
                 invalidation: RedisInvalidation | None, batcher: LastUsedBatcher) -> None:
        self.store = store
        self.keys = keys
        self.authenticator = authenticator
        self.invalidation = invalidation
        self.batcher = batcher


async def open_identity(services: Any, plans: dict[str, tuple[str, PlanConfig]]) -> IdentityParts:
    config: Config = services.config
    store = await open_keystore(config.keystore.url)
    services.on_close(store.close)
    batcher = LastUsedBatcher(store.touch, config.keystore.last_used_flush_s)
    batcher.start()
    services.on_close(batcher.close)
    authenticator = ApiKeyAuthenticator(store, plans, config.keystore.cache_ttl_s, config.keystore.environment,
                                        batcher)
    invalidation = None
    if is_redis_url(config.store.url):
        cache = authenticator.cache
        invalidation = RedisInvalidation(config.store.url, cache.invalidate, cache.set_invalidation_live)
        await invalidation.start()
        services.on_close(invalidation.close)

    async def announce(key_id: str) -> None:
        authenticator.cache.invalidate(key_id)
        if invalidation is not None:
            await invalidation.publish(key_id)

    keys = KeyService(store, announce)
    services.keystore = store
    services.keys = keys
    _mount_admin(services, keys)
    if config.demo is not None:
        await _demo_key(config.demo, keys)
    return IdentityParts(store, keys, authenticator, invalidation, batcher)


def _mount_admin(services: Any, keys: KeyService) -> None:
    env = services.config.admin.token_env
    if env is None:
        return
    token = os.environ.get(env, "")
    if not token:
        log.warning("admin API disabled: env var %s (admin.token_env) is not set", env)
        return
    from ..admin import AdminApi

    services.admin = AdminApi(keys, token, services.config)


async def _demo_key(demo: DemoConfig, keys: KeyService) -> None:
    plaintext, _ = await keys.create(demo.tenant, name="demo", reason="demo mode start-up", reviewer="tokenward")
    if demo.print_key:
        sys.stdout.write(f"demo key: {plaintext}\n")
        sys.stdout.flush()
