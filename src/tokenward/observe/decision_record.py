"""The decision record's fields (observe/decision_log.py builds and writes one per request).

A module of its own because msgspec reads a Struct's annotations from its module at class
creation, which a module compiled with mypyc (tokenward/compiled.py) does not keep.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..reconcile.usage import Usage


class DecisionRecord(msgspec.Struct, omit_defaults=True):
    ts: float
    request_id: str
    method: str
    route: str
    state: str
    status: int | None = None
    decided_by: str | None = None
    reason: str | None = None
    model: str | None = None
    stream: bool = False
    tenant: str | None = None
    key_id: str | None = None
    upstream_status: int | None = None
    usage: Usage | None = None
    stages_us: dict[str, float] | None = None
    duration_us: float = 0.0
    notes: dict[str, Any] | None = None
    answered_by: str | None = None     # a stage that answered the request itself (the cache)
    screening: dict[str, Any] | None = None   # scores and outcomes per detector, never text
    path_shape: str | None = None      # route ``other`` only: the path's shape, no value (observe/routes.py)
