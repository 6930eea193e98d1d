"""The ``Route`` protocol: what any layer may ask of the route a request is on.

The edge matches a request to a configured route (stages/s02_edge.py ``Route``); the
dialect stage replaces it with a ``DialectRoute`` (stages/s05_dialect.py) for OpenAI's
Responses API and Anthropic's Messages API. Both answer the same questions, so no stage
and no lower layer probes a route for optional attributes:

- the edge's: ``path``, ``methods``, ``content_types``, ``max_body_bytes``,
  ``allow_header``, ``has_body``;
- ``validates``: the route whose strict schema validates the body (a dialect's chat view
  validates as ``/v1/chat/completions``); ``upstream_path``: where that body goes;
- ``texts(request)``: every text the backend will receive from the caller, as units
  (validation/texts.py): what screening reads and masking rewrites;
- ``outside_prompt()``: texts the body carries beyond what the work stage counts in the
  validated request (a dialect's thinking blocks, reasoning summaries, metadata, ...),
  and opaque bytes (signatures, encrypted content), counted on top of it;
- ``stateful``: the backend reads context the request does not carry (a stored response,
  a container): the work stage reserves the whole context window for the prompt;
- ``render(checked, backend_model)``: the body for an upstream that serves the route's API
  natively, rendered from what the stages checked (``Checked``: the validated request,
  the screening, the entitlement) as a ``NativeCall``, or None: the validated body goes to
  ``upstream_path``;
- ``entitled_name(name)``: the name the plan's ``allow_tools`` entitles a tool of the
  validated body by (a Responses namespace's member, ``NAMESPACE__TOOL`` in the chat view,
  is entitled as ``NAMESPACE.TOOL``);
- ``client_terms(refusal)``: the refusal with its ``param`` in the terms of the client's
  own request (a dialect's chat view names ``tools[0].function.parameters`` what the
  client calls ``tools[2].input_schema``);
- ``edit_answer(editor)``: the response transform that applies a text editor (the
  personal-data restorer, the output redactor: chat-shaped ``StreamTextEdit``s) to the
  answer this route's upstream writes: the editor itself for a chat answer, wrapped for
  a dialect's native answer (dialects/native_edit.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol, Sequence

if TYPE_CHECKING:
    from ..errors import Refusal
    from ..pii.stream_edit import StreamTextEdit
    from ..validation.result import NormalizedRequest
    from ..validation.texts import TextUnit
    from .outbound import ResponseTransform
    from .results import Entitlement, Screening


class Checked(NamedTuple):
    """What the stages decided that a native body is rendered from (the context's slots)."""

    request: NormalizedRequest | None
    screening: Screening | None
    entitlement: Entitlement | None


class NativeCall(NamedTuple):
    """A body rendered in the route's own API, and the upstream path it goes to."""

    path: str
    body: bytes


class Route(Protocol):
    path: str
    methods: frozenset[str]
    content_types: frozenset[bytes]
    max_body_bytes: int
    allow_header: tuple[tuple[bytes, bytes], ...]
    has_body: bool
    validates: str
    upstream_path: str

    @property
    def stateful(self) -> bool: ...

    def texts(self, request: NormalizedRequest) -> list[TextUnit]: ...

    def outside_prompt(self) -> tuple[Sequence[str], int]: ...

    def render(self, checked: Checked, backend_model: str | None) -> NativeCall | None: ...

    def entitled_name(self, name: str) -> str: ...

    def client_terms(self, refusal: Refusal) -> Refusal: ...

    def edit_answer(self, editor: StreamTextEdit) -> ResponseTransform: ...
