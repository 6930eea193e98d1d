"""Key-change announcements over Redis pub/sub, so every replica drops a changed key at once.

Each gateway process subscribes to one channel; whoever changes a key (the admin API, the
CLI) publishes the key id after the change is committed. While the subscription is down
the cache falls back to a TTL of at most one second, and it is cleared whenever the
subscription comes back (an announcement may have been missed in between).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("tokenward.keys")

CHANNEL = "tokenward:keys:changed"
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def is_redis_url(url: str) -> bool:
    return url.startswith(REDIS_SCHEMES)


def _client(url: str) -> Redis:
    import redis.asyncio as aioredis

    # health_check_interval: an idle subscription PINGs, so a dead connection is noticed.
    return aioredis.from_url(url, socket_connect_timeout=2.0, health_check_interval=5)


async def publish_change(url: str, key_id: str, channel: str = CHANNEL) -> int:
    """One-off announcement (the CLI); returns how many gateway processes heard it."""
    client = _client(url)
    try:
        return int(await client.publish(channel, key_id))
    finally:
        await client.aclose()


class RedisInvalidation:
    """Subscribes for changes (``on_change(key_id)``) and publishes this process's own."""

    def __init__(self, url: str, on_change: Callable[[str], None], on_live: Callable[[bool], None],
                 channel: str = CHANNEL) -> None:
        self._url = url
        self._channel = channel   # another channel: the same machinery for other changes (control/)
        self._on_change = on_change
        self._on_live = on_live
        self._client = _client(url)
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self.live = False

    async def start(self, wait_s: float = 2.0) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"tokenward-{self._channel}")
        try:
            await asyncio.wait_for(self._subscribed.wait(), wait_s)
        except asyncio.TimeoutError:
            log.warning("key invalidation channel not reachable yet; key cache TTL capped at 1 s")

    async def publish(self, key_id: str) -> int:
        try:
            return int(await self._client.publish(self._channel, key_id))
        except Exception as exc:
            log.warning("could not announce a key change over Redis: %s", exc)
            return 0

    def _set_live(self, live: bool) -> None:
        if live != self.live:
            self.live = live
            self._on_live(live)

    async def _run(self) -> None:
        backoff = 0.05
        reported = False
        while True:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self._channel)
                self._set_live(True)
                self._subscribed.set()
                backoff, reported = 0.05, False
                while True:
                    message = await pubsub.get_message(timeout=5.0)
                    if message is not None and message["type"] == "message":
                        data = message["data"]
                        self._on_change(data.decode() if isinstance(data, bytes) else str(data))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not reported:  # once per outage, not once per retry
                    log.warning("key invalidation channel down (%s); key cache TTL capped at 1 s", exc)
                    reported = True
            finally:
                self._set_live(False)
                try:
                    await pubsub.aclose()
                except Exception:
                    pass
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self._client.aclose()
