"""The budget lab: deterministic scenarios run through the real admission code.

Each scenario drives the gateway's own ``Admitter`` (and, for jobs, its ``JobBook``) on the
in-memory budget store with an injected clock: the numbers come from the code that admits
real requests, not from a copy of its arithmetic. A scenario returns a ``Result`` (its
table, its plotted series and the assumptions behind them); ``report.py`` writes the JSON,
the PNG and the index page. ``tokenward lab SCENARIO`` runs one, ``tokenward lab all`` all.
"""

from __future__ import annotations

SCENARIOS = ("flood", "two-tenants", "fan-out", "crash", "replicas", "window-boundary")
