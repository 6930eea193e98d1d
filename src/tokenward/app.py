"""The HTTP shell: a plain ASGI app that turns each request into a pipeline run.

Only this module knows about ASGI scopes. Any exception that escapes the pipeline is
mapped here, once, to an ``internal_error`` envelope with no detail for the client.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import os
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Sequence

import msgspec

from . import compiled
from .config.schema import Config
from .errors import Reason, Refusal
from .pipeline.disconnect import DisconnectWatch
from .http.asgi import Receive, Scope, Send
from .http.responses import send_json, send_refusal
from .memos import enter as enter_tenant
from .own_routes import HEALTHY, STARTING, ModelList
from .observe.decision_log import DecisionLog, build_record
from .observe.telemetry import Telemetry
from .assemble.known_series import seed as seed_known_series
from .pipeline.context import RequestContext
from .pipeline.runner import Runner
from .stages.s03_identity import IdentityStage
from .assemble.gateway import Parts, assemble
from .assemble.routes import FAMILY_PREFIXES, MODEL_LIST, OWN_PATHS, Owner, RouteTable, route_table
from .stages import order
from .upstream.forward import Forwarder

if TYPE_CHECKING:
    from .jobs.api import JobsApi

log = logging.getLogger("tokenward")

# route_denied on a route the gateway has but was not told to serve: how to turn it on.
_NOT_SERVED = {
    "/metrics": "route /metrics is not served by this gateway: set server.expose_metrics: true to serve "
                "Prometheus metrics here (README, Operations)",
    "/admin/": "is not served by this gateway: the admin API needs admin.token_env naming an environment "
               "variable that holds the admin token, set where the gateway starts",
}


class Gateway:
    def __init__(self, config: Config, freeze_gc: bool = False, inherit: "Gateway | None" = None,
                 clock: Callable[[], float] | None = None,
                 stages: Sequence[tuple[str, order.Builder]] | None = None,
                 shared_metrics_dir: str | None = None, transports: Mapping[str, Any] | None = None) -> None:
        self.config = config
        self._freeze_gc = freeze_gc
        # A reload builds a new Gateway that inherits what lives in this process: the
        # in-memory budget store and cache, the metrics (cli/reload.py). ``clock`` and
        # ``stages`` are for tests and benches: a fake clock, a stage replaced
        # (stages/order.py). ``shared_metrics_dir``: where the workers of
        # ``serve --workers N`` answer a scrape together (cli/serve.py). ``transports``: an
        # upstream's transport by name when it is not HTTP over TCP (upstream/memory.py).
        self.telemetry: Telemetry = inherit.telemetry if inherit is not None else Telemetry(shared_metrics_dir)
        self._inherit = inherit
        self._clock = clock
        # read when the gateway starts: a bench may narrow stages.order.STAGES before that
        self._stages = stages
        self._transports = transports
        self._parts: Parts | None = None   # assembled at start-up (assemble/gateway.py)
        self.metrics = self.telemetry.requests
        # requests inside this app now: a replaced app shuts down once it has none left
        self.active = 0
        # set by whoever serves this app and can reload it (cli/serve.py): POST /admin/reload
        self.reload_hook: Callable[[], Awaitable[str]] | None = None
        self.runner: Runner | None = None
        self._ids = itertools.count(1)
        self._id_prefix = "req_" + os.urandom(4).hex()
        self._forwarder: Forwarder | None = None
        self._models = ModelList(config)
        self.metrics.routes.add(r.path for r in config.routes or ())   # the route labels metrics may take
        self._metrics_public = config.server.expose_metrics
        self._routes: RouteTable | None = None   # which part answers each path, once started
        self._loop: asyncio.AbstractEventLoop   # set by startup; no request is served before it
        self._observe: Callable[[RequestContext], None] | None = None
        self._decisions: DecisionLog | None = None
        self._jobs_api: JobsApi | None = None   # the /v1/jobs routes, built on their first request

    @property
    def parts(self) -> Parts:
        """The started gateway's parts (assemble/gateway.py)."""
        parts = self._parts
        if parts is None:
            raise RuntimeError("the gateway has not started: its parts are assembled at start-up")
        return parts

    async def startup(self) -> None:
        compiled.check()   # a compiled module older than its source would run code no one can read
        self._loop = asyncio.get_running_loop()
        inherited = self._inherit._parts if self._inherit is not None else None
        self._inherit = None   # the replaced gateway is not kept alive by this one
        parts = self._parts = await assemble(
            self.config, clock=self._clock, telemetry=self.telemetry,
            stages=self._stages if self._stages is not None else order.STAGES,
            inherited=inherited, transports=self._transports, reload=self._reload)
        await self.telemetry.exposition.start()   # with several workers: hear the others' scrapes
        await seed_known_series(parts)   # zeros for the configured label sets (assemble/known_series.py)
        # the abuse signals' share of each decision (abuse/observe.py), when configured; else
        # the status page's per-tenant screening counts (control/status.py), when it is served
        self._observe = parts.observe
        self._decisions = parts.decisions
        self._forwarder = Forwarder(parts.targets, self.config.stream)
        self.runner = Runner(parts.stages, self._forwarder, self._finish, routes={MODEL_LIST: self._models})
        self._routes = route_table(self.config, parts)
        if self._freeze_gc:
            # What start-up built lives as long as the process: keep it out of every GC pass.
            gc.collect()
            gc.freeze()
            # Full collections stop the loop for tens of ms with many open streams: make them
            # rarer. A young generation of 5,000 lets most of a request's objects die before
            # a collection sees them: 6-9% less CPU per request than 700 in four interleaved
            # pairs (docs/benchmarks.md), with 1,000 streams' gap p99 unharmed; 20,000 was worse.
            gc.set_threshold(5000, 50, 100)

    async def shutdown(self) -> None:
        self.runner = None
        if self._parts is not None:
            await self._parts.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # HTTP handled here, not in a helper: one coroutine frame less under every await
        # of a request (each suspension and resumption passes through every frame).
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self._lifespan(receive, send)
            return
        path = scope["path"]
        if (path in OWN_PATHS or path.startswith(FAMILY_PREFIXES)) and await self._own(path, scope, receive, send):
            return
        runner = self.runner
        if runner is None:
            await send_refusal(send, Refusal(Reason.budget_store_unavailable, "gateway is starting"),
                               self._next_id().encode())
            return
        ctx = RequestContext(self._next_id(), scope["method"], path, scope["headers"], receive, send,
                             perf_counter_ns())
        ctx.disconnect = DisconnectWatch(receive, self._loop)
        # no tenant's memos until identity names one: this task may have served another
        # tenant's request on the same connection (memos.py)
        enter_tenant(None)
        self.active += 1
        try:
            await runner.run(ctx)
        finally:
            self.active -= 1

    async def _own(self, path: str, scope: Scope, receive: Receive, send: Send) -> bool:
        """A path the routing table gives to a part other than the pipeline (assemble/routes.py):
        health, readiness, OpenAPI, metrics, admin, jobs, the mock's controls. False: the
        pipeline's after all (an own path asked with a method it does not answer)."""
        table = self._routes
        if table is None:   # not started yet: alive, not ready, nothing else
            if path == "/healthz":
                await send_json(send, 200, HEALTHY, self._next_id().encode())
            elif path == "/readyz":
                await send_json(send, 503, STARTING, self._next_id().encode())
            else:
                await send_refusal(send, Refusal(Reason.budget_store_unavailable, "gateway is starting"),
                                   self._next_id().encode())
            return True
        owner = table.owner(scope["method"], path)
        if owner is Owner.PIPELINE:
            return False
        if owner is Owner.HEALTH:
            await send_json(send, 200, HEALTHY, self._next_id().encode())
        elif owner is Owner.OPENAPI:
            from .openapi import openapi_document

            await send_json(send, 200, openapi_document(self.config.routes or ()), self._next_id().encode())
        elif owner is Owner.READY:
            await self._readyz(send)
        elif owner is Owner.METRICS:
            if not self._metrics_public:
                await send_refusal(send, Refusal(Reason.route_denied, _NOT_SERVED["/metrics"]),
                                   self._next_id().encode())
                return True
            await self.telemetry.exposition.send(send)
        elif owner is Owner.JOBS:
            await self._jobs(scope, receive, send)
        elif owner is Owner.MOCK:
            # the built-in mock's controls (stats, release, reset) on the gateway's own port,
            # when an upstream is builtin:mock (the quickstart); else the pipeline's route_denied
            mock = self.parts.builtin_mock
            if mock is None:
                return False
            await mock(scope, receive, send)
        else:
            admin = self.parts.admin
            if admin is None:
                await send_refusal(send, Refusal(Reason.route_denied, f"route {path} {self._admin_off()}"),
                                   self._next_id().encode())
            else:
                await admin(scope, receive, send)
        return True

    def _admin_off(self) -> str:
        """Why /admin/* is not served: no admin.token_env, or the variable it names is unset
        (named, so the operator knows which one to set; never its value)."""
        env = self.config.admin.token_env
        if env is None:
            return _NOT_SERVED["/admin/"]
        return (f"is not served by this gateway: admin.token_env names the environment variable {env}, which "
                "was not set (or empty) where the gateway started; set it to the admin token and restart")

    async def _jobs(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The agent-job routes (jobs/api.py), authenticated like completions."""
        if self.runner is None:
            await send_refusal(send, Refusal(Reason.budget_store_unavailable, "gateway is starting"),
                               self._next_id().encode())
            return
        api = self._jobs_api
        if api is None:
            from .jobs.api import JobsApi

            jobs = self.parts.jobs
            identity = next((stage for stage in self.parts.stages if isinstance(stage, IdentityStage)), None)
            if jobs is None or identity is None:   # a gateway built without admission or identity
                await send_refusal(send, Refusal(Reason.route_denied, "route /v1/jobs is not served by this gateway"),
                                   self._next_id().encode())
                return
            api = self._jobs_api = JobsApi(jobs, identity, self._finish)
        await api(scope, receive, send, self._next_id())

    async def _readyz(self, send: Send) -> None:
        """Ready once started and while every required upstream and the budget store answer."""
        if self.runner is None or self._parts is None:
            await send_json(send, 503, STARTING, self._next_id().encode())
            return
        health = self._parts.health
        ready, upstreams = await health.report()
        stores = await health.stores()   # budget_store: named while it cannot be reached
        failing = [name for name, probe in stores.items() if not probe["healthy"]]
        ready = ready and not failing
        answer: dict[str, Any] = {"status": "ok" if ready else "unavailable", "upstreams": upstreams}
        if stores:
            answer["stores"] = stores
        if failing:
            answer["unavailable"] = failing
        body = msgspec.json.encode(answer)
        await send_json(send, 200 if ready else 503, body, self._next_id().encode())

    async def _reload(self) -> dict[str, str]:
        if self.reload_hook is None:
            raise RuntimeError("this gateway was not started by tokenward serve; it cannot reload itself")
        return {"reloaded": await self.reload_hook()}

    def _finish(self, ctx: RequestContext) -> None:
        metrics = self.metrics
        metrics.observe(ctx)
        observe = self._observe
        if observe is not None:
            observe(ctx)
        decisions = self._decisions
        if decisions is not None and decisions.enabled:
            decisions.write(build_record(ctx, perf_counter_ns(), metrics.routes.label(ctx)))

    def _next_id(self) -> str:
        return self._id_prefix + hex(next(self._ids))[2:]   # hex(): a format spec costs a method call

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    log.error("start-up failed: %s", exc)
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return
