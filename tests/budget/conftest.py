"""Budget fixtures: each store (memory, and a real redis-server on a unix socket), a fake clock."""

from __future__ import annotations

import time

import pytest

from tests.fixtures.redis_cluster import redis_cluster  # noqa: F401
from tests.fixtures.redis_server import redis_server, redis_server_session  # noqa: F401
from tokenward.budget.memory import MemoryStore
from tokenward.budget.redis import RedisStore


class FakeClock:
    """Seconds since the epoch, moved only by the test. Starts at the real time so Redis
    key expiries computed from it (PEXPIREAT) land in the future."""

    def __init__(self, start: float | None = None) -> None:
        self.now = float(int(time.time())) if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    @property
    def ms(self) -> int:
        return int(self.now * 1000)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", "redis", "redis-py", "redis-cluster"])
async def store(request):
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "redis-cluster":
        cluster = request.getfixturevalue("redis_cluster")
        cluster.flush()
        cluster_store = RedisStore(cluster.url, timeout_s=1.0)
        yield cluster_store
        await cluster_store.close()
        return
    server = request.getfixturevalue("redis_server")
    redis_store = RedisStore(server.url, timeout_s=1.0, client="resp" if request.param == "redis" else "redis-py")
    yield redis_store
    await redis_store.close()
