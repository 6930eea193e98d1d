"""Answers the gateway gives itself, without a backend: model list, health, readiness."""

from __future__ import annotations

import time

from .config.globs import is_literal
from .config.schema import Config
from .pipeline.context import RequestContext
from .pipeline.stage import Exit, ExitKind
from .reconcile.usage import NOTHING_USED
from .http.responses import JSON
from .wire.codec import json_encode as _encode


class ModelList:
    """Each model, then its literal aliases (``models.NAME.aliases`` without a wildcard:
    names a client can pick from the list; a pattern is no name), each listed when the
    caller is entitled to the model that serves it."""

    def __init__(self, config: Config) -> None:
        created = int(time.time())
        # (the model that decides entitlement, its entry)
        self._models = [
            (model, {"id": name, "object": "model", "created": created, "owned_by": "tokenward"})
            for model, spec in config.models.items()
            for name in (model, *(a for a in spec.aliases if is_literal(a)))
        ]
        self._all = _encode({"object": "list", "data": [entry for _, entry in self._models]})

    async def __call__(self, ctx: RequestContext) -> Exit:
        entitled = ctx.entitlement.models if ctx.entitlement is not None else None
        if entitled is None:
            body = self._all
        else:
            body = _encode({"object": "list",
                            "data": [entry for model, entry in self._models if model in entitled]})
        ctx.status = 200
        headers = [JSON, (b"x-request-id", ctx.request_id.encode())]
        await ctx.out.whole(200, headers, body)
        return Exit(ExitKind.COMPLETED, None, NOTHING_USED)


HEALTHY = _encode({"status": "ok"})
STARTING = _encode({"status": "starting"})
