"""The controls as one replica sees them: a snapshot of what is in force (view.py),
refreshed at once when any replica or the CLI announces a change over Redis pub/sub,
and re-read on a timer as a safety net (every ``control.refresh_s`` while the channel is
live, every ``control.poll_s`` without one: a single gateway on the memory store picks up
the CLI's changes that way). A cancel of a tenant's streams is announced with its id and
carried out here on this replica's open requests, once per id whichever way it arrives.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Callable, Protocol

from ..config.abuse import ControlConfig
from .model import Control
from .repo import ControlRepo
from .streams import OpenRequests
from .view import ControlView

log = logging.getLogger("tokenward.control")
CHANNEL = "tokenward:control:changed"
CANCEL_STALE_S = 30.0   # a cancel event older than this when first heard of is history, not an order


class SlotStore(Protocol):
    """Where the open-request slots of a key under ``reduce_concurrency`` are counted, for
    every replica at once: the abuse signal store (abuse/store.py), which control/ sits below."""

    async def take_slot(self, key_id: str, request_id: str, limit: int, now_ms: int, lease_ms: int) -> bool: ...

    async def give_slot(self, key_id: str, request_id: str) -> None: ...


class ControlRuntime:
    def __init__(self, repo: ControlRepo, config: ControlConfig, store: SlotStore, redis_url: str | None = None,
                 clock: Callable[[], float] = time.time, open_streams: dict[str, int] | None = None) -> None:
        self.repo = repo
        self.config = config
        self.store = store                     # the signal store: concurrency slots live there
        self.view = ControlView()
        self.open = OpenRequests(open_streams if open_streams is not None else {})
        self._clock = clock
        self._channel = None
        if redis_url is not None:
            from ..keys.invalidate import RedisInvalidation

            self._channel = RedisInvalidation(redis_url, self._heard, self._live, channel=CHANNEL)
        self._done: OrderedDict[int, None] = OrderedDict()   # cancel ids carried out here
        self._last_cancel = 0
        self._task: asyncio.Task[None] | None = None
        self._refresh_task: asyncio.Task[None] | None = None
        self._dirty = False
        self.cancelled = 0          # requests ended by cancels on this replica

    def now(self) -> float:
        return self._clock()

    @property
    def live(self) -> bool:
        return self._channel is not None and self._channel.live

    async def start(self) -> None:
        self._last_cancel = await self.repo.last_id()
        await self.refresh()
        if self._channel is not None:
            await self._channel.start()
        self._task = asyncio.get_running_loop().create_task(self._poll(), name="tokenward-control-refresh")

    async def close(self) -> None:
        for task in (self._task, self._refresh_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self._channel is not None:
            await self._channel.close()

    async def refresh(self) -> None:
        self.view = ControlView(await self.repo.active())

    # -- announcements ---------------------------------------------------------------------
    async def announce(self, kind: str, control: Control) -> int:
        """After a change made in this process: apply it here, then tell the others;
        returns how many processes heard it (0 without the channel)."""
        if kind == "cancel_streams":
            self._cancel(control.id, control.tenant, control.created_at)
            message = f"cancel:{control.id}:{control.created_at!r}:{control.tenant}"
        else:
            await self.refresh()
            message = "changed"
        if self._channel is None:
            return 0
        return await self._channel.publish(message)

    def _heard(self, message: str) -> None:
        if message.startswith("cancel:"):
            _, ident, at, tenant = message.split(":", 3)
            self._cancel(int(ident), tenant, float(at))
        self._refresh_soon()

    def _live(self, live: bool) -> None:
        self._refresh_soon()   # a change may have been missed while the channel was down

    def _refresh_soon(self) -> None:
        task = self._refresh_task
        if task is not None and not task.done():
            self._dirty = True
            return
        self._refresh_task = asyncio.get_running_loop().create_task(self._refresh_quietly())

    async def _refresh_quietly(self) -> None:
        while True:
            self._dirty = False
            try:
                await self.refresh()
            except Exception as exc:   # the key store is down: keep the last view, retry on the timer
                log.warning("could not refresh the controls in force: %s", exc)
            if not self._dirty:
                return

    # -- cancels ---------------------------------------------------------------------------
    def _cancel(self, ident: int, tenant: str, at: float) -> None:
        if ident in self._done:
            return
        self._done[ident] = None
        while len(self._done) > 4096:
            self._done.popitem(last=False)
        self._last_cancel = max(self._last_cancel, ident)
        if at < self._clock() - CANCEL_STALE_S:
            return
        ended = self.open.cancel(tenant, {"by": "operator", "control_id": ident})
        self.cancelled += ended
        if ended:
            log.info("cancelled %d open request(s) of tenant %s (control %d)", ended, tenant, ident)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self.config.refresh_s if self.live else self.config.poll_s)
            try:
                await self.refresh()
                since = self._clock() - CANCEL_STALE_S
                for control in await self.repo.cancels_after(self._last_cancel, since):
                    self._cancel(control.id, control.tenant, control.created_at)
            except Exception as exc:
                log.warning("could not refresh the controls in force: %s", exc)
