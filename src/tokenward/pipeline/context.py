"""One request's context: what arrived, and each stage's typed result once it has run.

Stages write only their own slot (identity -> ``principal``, entitlement ->
``entitlement``, validation -> ``request``, work -> ``work``, admission ->
``reservation``, screening -> ``screening``) and read the
slots of the stages before them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..errors import Refusal
from ..reconcile.usage import UNKNOWN, Usage
from ..wire.request_body import RequestBody
from .lifecycle import Lifecycle
from .results import Work

if TYPE_CHECKING:
    from .disconnect import DisconnectWatch

Receive = Callable[[], Awaitable[dict[str, Any]]]
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
                 receive: Receive, send: Any, started_ns: int) -> None:
        self.request_id = request_id
        self.method = method
        self.path = path
        self.headers = headers
        self.receive = receive
        self.send = send
        self.started_ns = started_ns
        self.lifecycle = Lifecycle()
        self.route: Any = None
        # The body's bytes and every view decoded from them, once per version
        # (wire/request_body.py); ``body`` reads and replaces its bytes.
        self.parsed = RequestBody()
        self.model: str | None = None
        self.stream = False
        self.principal: Any = None
        self.entitlement: Any = None
        self.request: Any = None
        self.work: Work | None = None
        self.reservation: Any = None
        self.screening: Any = None
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
        self.transforms: list[Any] | None = None
        # The way out, built by the runner once the stages are through: every byte of the
        # answer passes it (forwarder, an answering stage).
        self.outbound: Any = None
        self.answered_by: str | None = None  # the stage that answered the request itself
        self.cache: Any = None  # a cache miss's pending capture, stored when the answer completes
        # The agent job the request runs in (jobs/runs.py JobRun), set by admission; the
        # forwarder asks it right before dispatch.
        self.job: Any = None

    @property
    def body(self) -> bytes:
        return self.parsed.raw

    @body.setter
    def body(self, raw: bytes) -> None:
        self.parsed.replace(raw)

    def add_transform(self, transform: Any) -> None:
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
