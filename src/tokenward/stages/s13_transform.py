"""Transform: the body the backend receives, rewritten as screening decided.

- *restricted* (an injection score between ``restrict_at`` and ``block_at``): tools,
  tool choice and functions are removed, and the output is clamped to the plan's
  ``restricted_max_output_tokens``;
- personal data in ``redact`` or ``tokenize`` mode: every span the detector found is
  masked (pii/placeholders.py), caller-typed look-alikes neutralized, in every text it
  read, attachments' extracted text included (the file part becomes a text part);
  ``tokenize`` registers the restorer as this request's response transform, so the
  answer gets the values back, whole or streamed, on every way out;
- ``pii.output: redact``: the output redactor (pii/output.py) masks personal data the
  model wrote on its own, registered after the restorer so it reads the answer first.

The masked prompt must stay inside what admission reserved: the changed texts are
counted again with the model's counter, and if masking made them longer (a short value,
a longer placeholder), ``max_tokens`` is lowered by the difference, so the worst case the
backend can spend is never above the reservation. The typed request validation left is
edited in place and encoded once, and only for a request that needs a rewrite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from ..errors import Reason, Refusal
from ..config.schema import Config
from ..observe.metrics import GatewayMetrics
from ..pii.output import OutputRedactor
from ..pii.placeholders import Masker
from ..pipeline.context import required
from ..pipeline.stage import BaseStage
from ..tokenize.registry import TokenizerRegistry
from ..validation.bounds import say_output_bound
from ..validation.schemas import ChatCompletionRequest, CompletionRequest
from ..wire.codec import json_encode as _encode

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext
    from ..pipeline.route import Route
    from ..validation.result import NormalizedRequest
    from ..pipeline.results import Screening


class TransformStage(BaseStage):
    name = "transform"
    needs = frozenset({"route", "request", "screening"})

    def __init__(self, counters: dict[str, Any], metrics: GatewayMetrics | None = None) -> None:
        self.counters = counters
        metrics = metrics if metrics is not None else GatewayMetrics()   # the gateway's (assemble/gateway.py)

        def count_output(counts: dict[str, int]) -> None:
            metrics.screened("pii_output", "patterns", "redacted", False)

        self._count_output = count_output

    def decide(self, ctx: RequestContext) -> Refusal | None:
        screened = ctx.screening
        if screened is None:
            return None
        route = required(ctx.route, "route")
        if screened.rewrites:
            request = required(ctx.request, "request")
            body = request.body     # the typed request: edited in place, encoded once
            if screened.restrict:
                _restrict(ctx, body, ctx.plan.restricted_max_output_tokens)
            if screened.pii_spans is not None:
                refusal = self._mask(ctx, screened, request, route)
                if refusal is not None:
                    return refusal
            # the chat view the later stages and a chat backend read; a dialect body that
            # goes natively is rendered from its own parse, which masking edited in place
            ctx.body = _encode(body)
        if screened.output_find is not None:
            # registered after the restorer, so it reads the answer first, while this
            # request's own values are still placeholders: only what the model wrote is masked
            record = screened.record.setdefault("pii", {})
            ctx.add_transform(route.edit_answer(OutputRedactor(screened.output_find, record, self._count_output)))
        return None

    def _mask(self, ctx: RequestContext, screened: Screening, request: NormalizedRequest,
              route: Route) -> Refusal | None:
        masker = Masker(restore=screened.pii_mode == "tokenize")
        by_unit: dict[int, list[tuple[int, int, str]]] = {}
        for span in screened.pii_spans or ():   # (admit() calls this only when there are some)
            by_unit.setdefault(span.text, []).append((span.start, span.end, span.label))
        grown = 0
        counter = self.counters.get(request.model)
        for i, unit in enumerate(screened.units):
            pieces = unit.pieces
            old = [piece.text for piece in pieces]
            new = masker.mask_pieces(old, by_unit.get(i, ()))
            if new == old:
                continue
            for piece, before, after in zip(pieces, old, new):
                if after == before:
                    continue
                if piece.holder is None:
                    # text with no place in the body cannot be masked there: never forward it
                    return Refusal(Reason.content_blocked, "personal data found where it cannot be masked")
                piece.write(after)
                if counter is not None:
                    grown += counter.count_uncached(after) - counter.count_uncached(before)
        record: dict[str, Any] = {"mode": screened.pii_mode, "masked": dict(masker.masked)}
        if masker.neutralized:
            record["neutralized"] = len(masker.neutralized)
        if grown > 0:
            refusal = _keep_within_reservation(ctx, request, grown, record)
            if refusal is not None:
                return refusal
        ctx.note("pii", record)
        restorer = masker.restorer()
        if restorer is not None:
            ctx.add_transform(route.edit_answer(restorer))
        return None


def _restrict(ctx: RequestContext, body: Any, cap: int) -> None:
    """Tools (chat's tools, tool choice, parallel calls) removed; the output bound lowered to
    ``cap``."""
    removed: list[str] = []
    if isinstance(body, ChatCompletionRequest):
        present: tuple[tuple[str, object], ...] = (("tools", body.tools), ("tool_choice", body.tool_choice),
                                                   ("parallel_tool_calls", body.parallel_tool_calls))
        removed = [field for field, value in present if value is not UNSET and value is not None]
        body.tools = body.tool_choice = body.parallel_tool_calls = UNSET
    clamped = {}
    for field, value in _output_bounds(body):
        if isinstance(value, int) and value > cap:
            setattr(body, field, cap)
            clamped[field] = value
            say_output_bound(ctx, cap)
    ctx.note("restricted", {"removed": removed, "clamped": clamped})


def _output_bounds(body: Any) -> list[tuple[str, object]]:
    """(field, value) of each output bound the body has (chat: two; completions: one)."""
    if isinstance(body, ChatCompletionRequest):
        return [("max_tokens", body.max_tokens), ("max_completion_tokens", body.max_completion_tokens)]
    if isinstance(body, CompletionRequest):
        return [("max_tokens", body.max_tokens)]
    return []


def _keep_within_reservation(ctx: RequestContext, request: NormalizedRequest, grown: int,
                             record: dict[str, Any]) -> Refusal | None:
    """Masking made the prompt ``grown`` tokens longer: take them off the output, which the
    reservation covered ``outer_items`` times."""
    body = request.body
    outer = max(request.outer_items, 1)
    cut = -(-grown // outer)
    record["prompt_grew"] = grown
    for field, value in _output_bounds(body):
        if isinstance(value, int):
            if value - cut < 1:
                return Refusal(Reason.context_too_large,
                               "masking personal data made the prompt longer than this request's max_tokens allows; "
                               "raise max_tokens", param=field)
            setattr(body, field, value - cut)
            record["output_cut"] = cut
            say_output_bound(ctx, value - cut)
    return None


def build(config: Config, tokenizers: TokenizerRegistry, metrics: GatewayMetrics) -> TransformStage | None:
    if not config.screening.policies:
        return None
    return TransformStage(tokenizers.counters, metrics)
