"""One request's context: what arrived, and each stage's typed result once it has run.

Each slot is written by the stage that owns it and read by the stages after it: the edge
and the dialect stage ``route`` (pipeline/route.py), identity ``principal``, entitlement
``entitlement`` (the control stage may narrow it through ``Entitlement.narrowed``),
validation ``request`` (with ``model`` and ``stream``), work ``work``, admission
``reservation`` (its ``record``, the decision record's ``notes.budget``) and ``job``,
screening ``screening``, the cache stage ``cache``; the runner ``outbound``. A slot is
None until its stage ran (or where the stage is not in the pipeline).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from ..config.schema import PlanConfig
from ..errors import Refusal
from ..http.asgi import Receive, Send
from ..reconcile.usage import UNKNOWN, Usage
from ..validation.result import NormalizedRequest
from ..wire.request_body import RequestBody
from .lifecycle import Lifecycle
from .results import Entitlement, JobTicket, Principal, Reservation, Screening, Work

if TYPE_CHECKING:
    from .disconnect import DisconnectWatch
    from .outbound import Outbound, ResponseTransform
    from .route import Route

T = TypeVar("T")
DEFAULT_PLAN = PlanConfig()
_features_cache: dict[tuple[str, ...], frozenset[str]] = {}
Header = tuple[bytes, bytes]


class RequestContext:
    __slots__ = (
        "request_id", "method", "path", "headers", "receive", "send", "started_ns",
        "lifecycle", "route", "parsed", "model", "stream",
        "principal", "entitlement", "request", "work", "reservation", "screening",
        "timings", "response_headers", "usage", "upstream_status", "deciding_stage",
        "reason", "status", "notes", "disconnect", "transforms", "outbound", "answered_by", "cache",
        "job",
    )

    def __init__(self, request_id: str, method: str, path: str, headers: list[Header],
                 receive: Receive, send: Send, started_ns: int) -> None:
        self.request_id = request_id
        self.method = method
        self.path = path
        self.headers = headers
        self.receive = receive
        self.send = send
        self.started_ns = started_ns
        self.lifecycle = Lifecycle()
        self.route: Route | None = None
        # The body's bytes and every view decoded from them, once per version
        # (wire/request_body.py); ``body`` reads and replaces its bytes.
        self.parsed = RequestBody()
        self.model: str | None = None
        self.stream = False
        self.principal: Principal | None = None
        self.entitlement: Entitlement | None = None
        self.request: NormalizedRequest | None = None
        self.work: Work | None = None
        self.reservation: Reservation | None = None
        self.screening: Screening | None = None
        self.timings: list[tuple[str, int]] = []
        # Extra headers for an admitted response (rate-limit headers and the like).
        self.response_headers: list[Header] = []
        self.usage: Usage = UNKNOWN
        self.upstream_status: int | None = None
        self.deciding_stage: str | None = None
        self.reason: str | None = None
        self.status: int | None = None
        # Free-form facts for the decision record (counts, flags), set by stages.
        self.notes: dict[str, Any] | None = None
        self.disconnect: DisconnectWatch | None = None
        # Response transforms stages register while admitting (pipeline/outbound.py), in
        # stage order; the runner applies them newest first on the way out.
        self.transforms: list[ResponseTransform] | None = None
        # The way out, built by the runner once the stages are through: every byte of the
        # answer passes it (forwarder, an answering stage).
        self.outbound: Outbound | None = None
        self.answered_by: str | None = None  # the stage that answered the request itself
        # a cache miss's capture (one of the transforms), stored when the answer completes
        self.cache: ResponseTransform | None = None
        # The agent job the request runs in (jobs/runs.py JobRun), set by admission; the
        # forwarder asks it right before dispatch.
        self.job: JobTicket | None = None

    @property
    def plan(self) -> PlanConfig:
        """The plan that governs the request: the entitlement's (a control may have narrowed
        it), else the caller's, else the defaults (a route no identity guards)."""
        entitlement = self.entitlement
        if entitlement is not None:
            return entitlement.plan
        principal = self.principal
        return principal.plan if principal is not None else DEFAULT_PLAN

    def features(self, plan: PlanConfig) -> frozenset[str]:
        """The enabled features: the entitlement's set when it decided one, else the plan's."""
        entitlement = self.entitlement
        if entitlement is not None and entitlement.features:
            return entitlement.features
        features = _features_cache.get(plan.features)
        if features is None:
            features = frozenset(plan.features)
            if len(_features_cache) < 1024:
                _features_cache[plan.features] = features
        return features

    @property
    def out(self) -> Outbound:
        """The way out, once the runner built it (every exit after the stages)."""
        outbound = self.outbound
        if outbound is None:
            raise RuntimeError("the request has no way out yet: the runner builds it before the forward step")
        return outbound

    @property
    def body(self) -> bytes:
        return self.parsed.raw

    @body.setter
    def body(self, raw: bytes) -> None:
        self.parsed.replace(raw)

    def add_transform(self, transform: ResponseTransform) -> None:
        if self.transforms is None:
            self.transforms = []
        self.transforms.append(transform)

    def header(self, name: bytes) -> bytes | None:
        """First value of a header; ``name`` lowercase (ASGI servers lowercase names)."""
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def refused_by(self, stage: str, refusal: Refusal) -> Refusal:
        """Record that ``stage`` ended this request with ``refusal`` (the decision record's
        stage, reason and status); returns the refusal, for the one exit to send."""
        self.deciding_stage = stage
        self.reason = refusal.reason.name
        self.status = refusal.status
        return refusal

    def note(self, key: str, value: Any) -> None:
        if self.notes is None:
            self.notes = {}
        self.notes[key] = value


def required(value: T | None, slot: str) -> T:
    """A slot a stage needs: its value, or an error naming the stage that did not run
    before it (the assembly refuses such an order: stages/order.py)."""
    if value is None:
        raise RuntimeError(f"ctx.{slot} is not set: the stage that writes it did not run before this one")
    return value
