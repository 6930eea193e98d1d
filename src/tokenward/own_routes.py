"""Answers the gateway gives itself, without a backend: model list, health, readiness."""

from __future__ import annotations

import time

import msgspec

from .config.schema import Config
from .pipeline.context import RequestContext
from .pipeline.stage import Exit, ExitKind
from .reconcile.usage import NOTHING_USED
from .http.responses import JSON

_encode = msgspec.json.encode


class ModelList:
    def __init__(self, config: Config) -> None:
        created = int(time.time())
        self._models = {
            name: {"id": name, "object": "model", "created": created, "owned_by": "tokenward"}
            for name in config.models
        }
        self._all = _encode({"object": "list", "data": list(self._models.values())})

    async def __call__(self, ctx: RequestContext) -> Exit:
        entitled = getattr(ctx.entitlement, "models", None)
        if entitled is None:
            body = self._all
        else:
            body = _encode({"object": "list",
                            "data": [m for name, m in self._models.items() if name in entitled]})
        ctx.status = 200
        headers = [JSON, (b"x-request-id", ctx.request_id.encode())]
        await ctx.outbound.whole(200, headers, body)
        return Exit(ExitKind.COMPLETED, None, NOTHING_USED)


HEALTHY = _encode({"status": "ok"})
STARTING = _encode({"status": "starting"})
