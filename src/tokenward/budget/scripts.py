"""The budget store's Lua scripts (``lua/*.lua``), loaded once, each with its EVALSHA head.

Apart from ``redis.py`` so that the store and its job calls (``redis_jobs.py``) both read
them without importing each other.
"""

from __future__ import annotations

import hashlib
from importlib import resources


def _load(name: str) -> bytes:
    return resources.files("tokenward.budget").joinpath("lua").joinpath(name).read_bytes()


class Script:
    __slots__ = ("source", "sha", "head")

    def __init__(self, name: str) -> None:
        # Redis scripts cannot import: the shared helpers are prepended to each one.
        self.source = _load("state.lua") + _load(name)
        self.sha = hashlib.sha1(self.source).hexdigest().encode()
        self.head = b"$7\r\nEVALSHA\r\n$40\r\n" + self.sha + b"\r\n"


RESERVE = Script("reserve.lua")
SETTLE = Script("settle.lua")
SWEEP = Script("sweep.lua")
JOB_CREATE = Script("job_create.lua")
JOB_CLOSE = Script("job_close.lua")
JOB_DISPATCH = Script("job_dispatch.lua")
SCRIPTS = (RESERVE, SETTLE, SWEEP, JOB_CREATE, JOB_CLOSE, JOB_DISPATCH)
