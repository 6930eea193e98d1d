"""uvicorn's httptools protocol, told to report a lost connection to the request it serves.

ASGI reports a disconnect only through ``receive()``, which costs a watcher task per
request. Under ``tokenward serve`` the protocol instead calls a hook the request left on
its cycle object, so noticing a client that goes away costs one attribute per request.
Other servers (and plain uvicorn in tests) fall back to the watcher task.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HOOK = "tokenward_on_disconnect"


class GatewayHttpProtocol(HttpToolsProtocol):
    supports_disconnect_hook = True

    def connection_lost(self, exc: Exception | None) -> None:
        cycle = self.cycle
        super().connection_lost(exc)
        if cycle is not None and not cycle.response_complete:
            hook = cycle.__dict__.get(HOOK)
            if hook is not None:
                hook()
