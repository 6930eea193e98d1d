"""The budget store a config names: this process's memory, or Redis (one server or a cluster)."""

from __future__ import annotations

from ..config.schema import Config
from ..errors import ConfigError
from .memory import MemoryStore
from .store import BudgetStore


def open_store(config: Config) -> BudgetStore:
    url = config.store.url
    if url == "memory":
        return MemoryStore()
    if url.startswith(("redis://", "rediss://", "unix://")):
        from .redis import RedisStore   # redis-py: imported only when a Redis store is named

        return RedisStore(url, config.store.timeout_ms / 1000, config.store.client)
    raise ConfigError("store.url", f"expected 'memory', redis://, rediss:// or unix://, got {url!r}")
