"""Notice a client that goes away while its request is being forwarded.

If the client leaves, the request's task is cancelled, which aborts the backend
connection (the backend sees its client go away and stops generating). Two ways to
notice: under the gateway's own server (``server.py``) the request's cycle calls a hook
we leave on it (no task); under any other ASGI server one task waits on ``receive()``
for ``http.disconnect``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import Refusal

from ..http.asgi import Receive


def _cycle_with_hook(receive: Receive) -> Any:
    """The request cycle behind ``receive``, if it calls ``on_disconnect`` (our server's does)."""
    cycle = getattr(receive, "__self__", None)
    return cycle if getattr(cycle, "supports_disconnect_hook", False) else None


class DisconnectWatch:
    __slots__ = ("_receive", "_loop", "_target", "_task", "_cycle", "armed", "fired", "ending")

    def __init__(self, receive: Receive, loop: asyncio.AbstractEventLoop) -> None:
        self._receive = receive
        self._loop = loop
        self._target: asyncio.Task[Any] | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cycle: Any = None
        self.armed = False
        self.fired = False
        # set by ``cancel``: answers the client (still there) once the request has unwound
        # how a cancel from outside ends the request (the runner sends it): None, the client left
        self.ending: Refusal | None = None

    def arm(self) -> None:
        """Start watching; call only after the request body has been read."""
        self._target = asyncio.current_task(self._loop)
        self.armed = True
        cycle = _cycle_with_hook(self._receive)
        if cycle is not None:
            if cycle.disconnected:
                self._fire()
                return
            self._cycle = cycle
            cycle.on_disconnect = self._fire
            return
        self._task = self._loop.create_task(self._watch())

    def disarm(self) -> None:
        # After the response ends the server reports a "disconnect" too; that one is not ours.
        self.armed = False
        if self._cycle is not None:
            self._cycle.on_disconnect = None
            self._cycle = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    def cancel(self, ending: Refusal | None = None) -> bool:
        """End the request from outside while it is being forwarded (an operator's cancel),
        as a disconnect would; ``ending``, the refusal the runner sends the client (still
        there) after the unwinding, through the request's one way out. False: not being
        forwarded now."""
        if not self.armed or self.fired or self._target is None:
            return False
        self.ending = ending
        self._fire()
        return True

    def _fire(self) -> None:
        if self.armed and self._target is not None and not self.fired:
            self.fired = True
            self._target.cancel()

    async def _watch(self) -> None:
        while self.armed:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._fire()
                return

