"""The gateway's routing table: for any method and path, which part answers it.

One table per started gateway, built from its parts (assemble/gateway.py). The app asks it
what serves each request's path (``RouteTable.owner``: one dict lookup, then one prefix
test), and ``tokenward routes --config F`` prints it (``RouteTable.served``): every method
and path the gateway answers, each once, with what answers it.

- the gateway's own answers: ``GET /healthz``, ``/readyz``, ``/openapi.json``, and
  ``/metrics`` when ``server.expose_metrics`` is on;
- the admin API (``/admin/...``), each of its routes (admin/api.py ``AdminApi.table``),
  when an admin token is set;
- the agent-job routes (``/v1/jobs``) when the gateway admits work (the admission stage);
- the built-in mock's controls (``/_mock/...``) when an upstream is ``builtin:mock``;
- every configured route, through the pipeline: the stages that run on its path, in order,
  then what answers: the forward step, or the gateway itself (the model list, a token count).

Anything else reaches the pipeline, whose edge answers ``route_denied`` (or
``method_not_allowed`` on a configured path), as does an own path asked with a method it
does not list.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from ..config.schema import Config
from ..jobs.api import PREFIX as JOBS_PREFIX
from ..pipeline.stage import Stage
from ..stages.s05_dialect import COUNT_TOKENS
from .gateway import Parts


class Owner(enum.Enum):
    HEALTH = "liveness"
    READY = "readiness: upstreams and the budget store"
    OPENAPI = "the OpenAPI document of the public routes"
    METRICS = "Prometheus metrics"
    ADMIN = "admin API"
    JOBS = "agent jobs"
    MOCK = "the built-in mock's controls"
    PIPELINE = "pipeline"


class Served(NamedTuple):
    method: str
    path: str     # a pattern where a part is a name in braces: /admin/keys/{id}
    owner: Owner
    what: str     # what answers it, for people



# paths the gateway answers itself, and the families of paths it hands to one of its parts
OWN_PATHS = {"/healthz": Owner.HEALTH, "/readyz": Owner.READY, "/openapi.json": Owner.OPENAPI,
             "/metrics": Owner.METRICS}
FAMILIES = (("/admin/", Owner.ADMIN), (JOBS_PREFIX, Owner.JOBS), ("/_mock/", Owner.MOCK))
FAMILY_PREFIXES = tuple(prefix for prefix, _ in FAMILIES)
# the routes the gateway answers after the pipeline admitted them, and how
MODEL_LIST = "/v1/models"
ANSWERED_HERE = {MODEL_LIST: "the model list the caller is entitled to (no upstream)"}


class RouteTable:
    __slots__ = ("served", "_own_methods")

    def __init__(self, served: tuple[Served, ...]) -> None:
        self.served = served
        # own path -> the methods it answers (an own path not listed: not served here)
        self._own_methods: dict[str, frozenset[str]] = {}
        for route in served:
            if route.owner in (Owner.HEALTH, Owner.READY, Owner.OPENAPI, Owner.METRICS):
                self._own_methods[route.path] = self._own_methods.get(route.path, frozenset()) | {route.method}

    def owner(self, method: str, path: str) -> Owner:
        """Which part answers ``method path`` (the pipeline unless another part owns it)."""
        own = OWN_PATHS.get(path)
        if own is not None:
            # /metrics unexposed is still the metrics part's to refuse, with how to turn it on
            methods = self._own_methods.get(path)
            if methods is not None and method in methods or own is Owner.METRICS and method == "GET":
                return own
            return Owner.PIPELINE
        if path.startswith(FAMILY_PREFIXES):
            for prefix, family in FAMILIES:
                if path.startswith(prefix):
                    return family
        return Owner.PIPELINE

    def lines(self) -> list[str]:
        rows = [("METHOD", "PATH", "OWNER", "WHAT ANSWERS"),
                *((r.method, r.path, r.owner.name.lower(), r.what) for r in self.served)]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        return [f"{m:<{widths[0]}}  {p:<{widths[1]}}  {o:<{widths[2]}}  {w}" for m, p, o, w in rows]


def route_table(config: Config, parts: Parts) -> RouteTable:
    served: list[Served] = [Served("GET", "/healthz", Owner.HEALTH, Owner.HEALTH.value),
                            Served("GET", "/readyz", Owner.READY, Owner.READY.value),
                            Served("GET", "/openapi.json", Owner.OPENAPI, Owner.OPENAPI.value)]
    if config.server.expose_metrics:
        served.append(Served("GET", "/metrics", Owner.METRICS, Owner.METRICS.value))
    for configured in config.routes or ():
        what = _pipeline(configured.path, parts.stages)
        served.extend(Served(method, configured.path, Owner.PIPELINE, what) for method in configured.methods)
    if parts.jobs is not None and any(stage.name == "identity" for stage in parts.stages):
        served += [Served("POST", JOBS_PREFIX, Owner.JOBS, "start an agent job (identity as for completions)"),
                   Served("GET", JOBS_PREFIX + "/{id}", Owner.JOBS, "a job of the caller's tenant"),
                   Served("DELETE", JOBS_PREFIX + "/{id}", Owner.JOBS, "stop a job of the caller's tenant")]
    if parts.admin is not None:
        served.extend(Served(admin.method, admin.path, Owner.ADMIN, admin.summary) for admin in parts.admin.table)
    if parts.builtin_mock is not None:
        served.extend(Served(method, path, Owner.MOCK, Owner.MOCK.value)
                      for method, path in parts.builtin_mock.control_routes)
    seen: set[tuple[str, str]] = set()
    for route in served:
        key = (route.method, route.path)
        if key in seen:
            raise ValueError(f"{route.method} {route.path} is served twice")
        seen.add(key)
    return RouteTable(tuple(served))


def _pipeline(path: str, stages: tuple[Stage, ...]) -> str:
    """The stages that run on ``path`` in order, then what answers it."""
    names = [stage.name for stage in stages if stage.on_routes is None or path in stage.on_routes]
    answer = ANSWERED_HERE.get(path)
    if answer is None:
        counted = path == COUNT_TOKENS and "count_tokens" in names
        answer = "the count_tokens stage answers (no upstream)" if counted else "forward to the model's upstream"
    return " > ".join(names) + " > " + answer
