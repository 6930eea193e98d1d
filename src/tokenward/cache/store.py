"""Where cache entries live: in this process's memory, or in Redis; one interface.

Both hold opaque bytes under keys the cache stage makes (``tw:{t:<tenant>}:c:<keyed
hash>``: hash-tagged per tenant, so a tenant's entries share one Redis Cluster slot and a
purge walks one node), with a TTL and a per-entry size cap. Neither is ever a reason to
refuse a request: a store that fails is a miss (``CacheUnavailable``, counted by the
stage), and a write that fails is dropped.

- ``MemoryCache``: an LRU bounded in entries and bytes; expired entries are dropped when
  met. ``evictions`` counts what the bounds pushed out.
- ``RedisCache``: ``SET key value PX ttl`` and ``GET``, through the budget store's lean
  RESP client and its cluster routing (budget/redis.py). Values are sealed with AES-GCM
  under the deployment's cache key (``cache.key_env``), so what sits in Redis is neither
  a completion nor anything an operator with Redis access can read.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any, Callable, Protocol


class CacheUnavailable(Exception):
    """The cache store did not answer (a miss, never a refusal)."""


class CacheStore(Protocol):
    name: str
    evictions: int

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes, ttl_s: float) -> None: ...

    async def purge(self, prefix: str) -> int: ...

    def size_bytes(self) -> int | None: ...

    async def close(self) -> None: ...


class MemoryCache:
    name = "memory"

    def __init__(self, max_entries: int, max_bytes: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._entries: collections.OrderedDict[str, tuple[float, bytes]] = collections.OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._bytes = 0
        self._clock = clock
        self.evictions = 0

    async def get(self, key: str) -> bytes | None:
        return self.peek(key)

    def peek(self, key: str) -> bytes | None:
        """``get`` without a coroutine: nothing here waits (the stage calls it directly)."""
        found = self._entries.get(key)
        if found is None:
            return None
        expires, value = found
        if expires <= self._clock():
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return value

    async def set(self, key: str, value: bytes, ttl_s: float) -> None:
        self.put(key, value, ttl_s)

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        """``set`` without a coroutine: nothing here waits (the stage calls it directly).
        At the bounds every put of a new key evicts, so this is on every miss's path."""
        entries = self._entries
        size = self._bytes + len(value)
        old = entries.pop(key, None)
        if old is not None:
            size -= len(old[1])
        entries[key] = (self._clock() + ttl_s, value)
        while len(entries) > self._max_entries or size > self._max_bytes:
            size -= len(entries.popitem(False)[1][1])    # the least recently used
            self.evictions += 1
        self._bytes = size

    async def purge(self, prefix: str) -> int:
        doomed = [key for key in self._entries if key.startswith(prefix)]
        for key in doomed:
            self._drop(key)
        return len(doomed)

    def _drop(self, key: str) -> None:
        _, value = self._entries.pop(key)
        self._bytes -= len(value)

    def size_bytes(self) -> int | None:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    async def close(self) -> None:
        self._entries.clear()
        self._bytes = 0


class RedisCache:
    name = "redis"

    def __init__(self, url: str, timeout_s: float, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        from ..budget.redis import RedisStore

        self._redis = RedisStore(url, timeout_s)
        self._seal = AESGCM(key)
        self.evictions = 0   # Redis evicts on its own (maxmemory-policy); not seen from here

    async def get(self, key: str) -> bytes | None:
        from ..budget.resp import pack

        reply = await self._call(key, pack(b"GET", key))
        if reply is None:
            return None
        try:
            return self._seal.decrypt(reply[:12], reply[12:], key.encode())
        except Exception:  # sealed under another key (rotated), or damaged: a miss
            return None

    async def set(self, key: str, value: bytes, ttl_s: float) -> None:
        from ..budget.resp import pack

        nonce = os.urandom(12)
        sealed = nonce + self._seal.encrypt(nonce, value, key.encode())
        await self._call(key, pack(b"SET", key, sealed, b"PX", max(int(ttl_s * 1000), 1)))

    async def purge(self, prefix: str) -> int:
        from ..budget.resp import pack

        cursor, removed = b"0", 0
        while True:
            reply = await self._call(prefix, pack(b"SCAN", cursor, b"MATCH", prefix + "*", b"COUNT", 500))
            cursor, keys = reply
            if keys:
                removed += await self._call(prefix, pack(b"UNLINK", *keys))
            if cursor in (b"0", 0):
                return removed

    async def _call(self, route_key: str, command: bytes) -> Any:   # the RESP reply
        from ..budget.store import StoreUnavailable

        try:
            [reply] = await self._redis.run_keyed([(route_key, command)])
        except (StoreUnavailable, OSError, TimeoutError) as exc:
            raise CacheUnavailable(str(exc)) from None
        return reply

    def size_bytes(self) -> int | None:
        return None

    async def close(self) -> None:
        await self._redis.close()
