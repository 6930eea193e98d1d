"""Key-change announcements over a real redis-server: what lets the cache TTL exceed 1 s."""

from __future__ import annotations

import asyncio
import time

from tests.identity.conftest import bearer, chat, run_gateway, write_config
from tokenward.keys.invalidate import publish_change


async def _eventually(predicate, timeout: float = 3.0) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, "condition never became true"
        await asyncio.sleep(0.01)
    return time.monotonic() - started


async def test_announced_changes_beat_a_long_ttl_and_an_outage_caps_it(tmp_path, backend, redis_server):
    config = write_config(tmp_path, backend.port, store={"url": redis_server.url}, keystore={"cache_ttl_s": 30.0})
    async with run_gateway(config) as gw:
        parts = gw.identity
        cache = parts.authenticator.cache
        assert parts.invalidation.live and cache.ttl_s == 30.0
        key = await gw.new_key()
        assert (await gw.post("/v1/chat/completions", chat(), bearer(key))).status_code == 200
        # Changed in the database by someone who did not announce it: the 30 s TTL holds.
        await parts.store.revoke(key[3:19], reason="silent change")
        assert (await gw.post("/v1/chat/completions", chat(), bearer(key))).status_code == 200
        # The announcement (as the CLI in another process sends it) lands at once.
        assert await publish_change(redis_server.url, key[3:19]) >= 1
        started = time.monotonic()
        while (await gw.post("/v1/chat/completions", chat(), bearer(key))).status_code == 200:
            assert time.monotonic() - started < 0.5
            await asyncio.sleep(0.005)

        # Redis goes away: announcements could be missed, so the TTL drops to 1 s.
        redis_server.stop()
        await _eventually(lambda: not parts.invalidation.live)
        assert cache.ttl_s == 1.0
        redis_server.start()
        await _eventually(lambda: parts.invalidation.live, timeout=5.0)
        assert cache.ttl_s == 30.0 and len(cache) == 0  # cleared: it may have missed announcements
