"""The ASGI interface's types, as the gateway's server and its apps use them (ASGI 3.0).

Scopes and messages stay plain dicts (the ASGI spec's own form: the server builds them once
per request, and a TypedDict per message type would cost a union the app narrows on every
``receive``); what is typed here is the shape of the callables between server and app.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Protocol

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
# Reloads the config of whatever serves the app; returns what it did, for the operator.
ReloadHook = Callable[[], Awaitable[str]]


class ReloadableApp(Protocol):
    """An ASGI app that the server hands a way to reload it (the gateway: POST /admin/reload)."""

    reload_hook: ReloadHook | None

    async def __call__(self, scope: Scope, receive: Receive, send: Send, /) -> None: ...
