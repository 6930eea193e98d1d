"""Config reload without a restart: SIGHUP, or ``POST /admin/reload``.

The config file is loaded and verified exactly as ``serve`` and ``check-config`` do
(cli/check.py); a config that does not pass is refused and the running one keeps
serving. A config that passes becomes a new ``Gateway`` (plans, tenants, models, routes,
screening, cache, upstreams: everything the stages are built from), started beside the
running one; once it has started, the server hands it every new request, on open
keep-alive connections too, while the old one finishes what it has, streams included,
and then shuts down (http/serving.py ``HttpServer.swap``). State that lives in this
process carries over: the in-memory budget store (its buckets, gauges and open
reservations) and the in-memory response cache.

What the listener is made of cannot change under it: ``server.*`` (address, port,
workers, TLS, keep-alive) and the edge's head limits. A reload that changes them is
refused, naming them; they need a restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from .. import memos
from ..config import load_config
from ..errors import ConfigError

if TYPE_CHECKING:
    from ..config.schema import Config
    from ..http.serving import HttpServer

_FIXED = (("server", None), ("edge", "max_header_bytes"), ("edge", "max_headers"))


class ReloadFailed(Exception):
    """The new config was refused; the running one keeps serving."""


class Reloader:
    def __init__(self, config_path: str | Path) -> None:
        self.config_path = Path(config_path)

    async def __call__(self, server: HttpServer) -> str:
        from ..app import Gateway
        from .check import verify_config
        from ..http.serving import StartupFailed

        try:
            config = load_config(self.config_path)
            verify_config(config)
        except ConfigError as exc:
            raise ReloadFailed(f"{self.config_path}: {exc}") from None
        old = server.app
        if not isinstance(old, Gateway):
            raise ReloadFailed("the server runs an app other than the gateway: nothing to reload")
        fixed = _changed_fixed(old.config, config)
        if fixed:
            raise ReloadFailed(f"{', '.join(fixed)} cannot change without a restart")
        # the demo key is a first start's; a reload never makes one
        new = Gateway(msgspec.structs.replace(config, demo=None), inherit=old)
        memos.configure(config.memos.max_bytes)
        new.reload_hook = old.reload_hook
        try:
            await server.swap(new)
        except StartupFailed as exc:
            raise ReloadFailed(f"the new config did not start: {exc}") from None
        return f"{len(config.models)} models, {len(config.plans)} plans, {len(config.tenants)} tenants"


def _changed_fixed(old: Config, new: Config) -> list[str]:
    changed = []
    for section, field in _FIXED:
        before, after = getattr(old, section), getattr(new, section)
        if field is None:
            if msgspec.structs.asdict(before) != msgspec.structs.asdict(after):
                changed.append(section)
        elif getattr(before, field) != getattr(after, field):
            changed.append(f"{section}.{field}")
    return changed
