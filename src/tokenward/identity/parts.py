"""What the identity stage stands on, opened once at start-up (assemble/providers.py): the
key service over the key store, the API-key authenticator with its cache, the cross-replica
invalidation of that cache, and the last-used batcher."""

from __future__ import annotations

from ..config.loader import effective_plan
from ..config.schema import Config, PlanConfig
from ..keys.invalidate import RedisInvalidation
from ..keys.last_used import LastUsedBatcher
from ..keys.service import KeyService
from ..keys.store import KeyStore
from .apikeys import ApiKeyAuthenticator

# tenant -> (its plan's name, its effective plan)
TenantPlans = dict[str, tuple[str, PlanConfig]]


def tenant_plans(config: Config) -> TenantPlans:
    """Each tenant's plan name and effective plan, computed once at start-up."""
    return {tenant: (spec.plan, effective_plan(config, tenant)) for tenant, spec in config.tenants.items()}


class IdentityParts:
    __slots__ = ("store", "keys", "authenticator", "invalidation", "batcher", "plans")

    def __init__(self, store: KeyStore, keys: KeyService, authenticator: ApiKeyAuthenticator,
                 invalidation: RedisInvalidation | None, batcher: LastUsedBatcher, plans: TenantPlans) -> None:
        self.store = store
        self.keys = keys
        self.authenticator = authenticator
        self.invalidation = invalidation
        self.batcher = batcher
        self.plans = plans
