"""Notice a client that goes away while its request is being forwarded.

ASGI servers report a disconnect only through ``receive()``, so while the backend works
one task waits on it; if the client leaves, the request's task is cancelled, which
aborts the backend connection (the backend sees its client go away and stops).
"""

from __future__ import annotations

import asyncio

from ..pipeline.context import Receive


class DisconnectWatch:
    __slots__ = ("_receive", "_target", "_task", "armed", "fired")

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._target: asyncio.Task | None = None
        self._task: asyncio.Task | None = None
        self.armed = False
        self.fired = False

    def arm(self) -> None:
        """Start watching; call only after the request body has been read."""
        self._target = asyncio.current_task()
        self.armed = True
        self._task = asyncio.get_running_loop().create_task(self._watch())

    def disarm(self) -> None:
        # After the response ends the server reports a "disconnect" too; that one is not ours.
        self.armed = False
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    async def _watch(self) -> None:
        while self.armed:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                if self.armed and self._target is not None:
                    self.fired = True
                    self._target.cancel()
                return
