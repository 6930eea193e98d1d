"""``tokenward routes --config F``: the routing table of a gateway started with that config.

The gateway's parts are assembled exactly as ``serve`` assembles them (the stores opened,
so a store that cannot be reached is named, exit 3) and closed again; nothing listens.
The demo key of a ``demo:`` config is not made.
"""

from __future__ import annotations

import msgspec

from ..assemble.gateway import assemble
from ..assemble.routes import route_table
from ..config.schema import Config
from ..observe.telemetry import Telemetry


async def routing_lines(config: Config) -> list[str]:
    config = msgspec.structs.replace(config, demo=None)
    # serve hands the gateway its reload; listed as serve serves it, never called here
    parts = await assemble(config, telemetry=Telemetry(), reload=_listed_only)
    try:
        return route_table(config, parts).lines()
    finally:
        await parts.stop()


async def _listed_only() -> str:
    raise RuntimeError("a gateway assembled to list its routes does not reload")
