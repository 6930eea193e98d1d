"""Validation: the request body, strictly decoded, bounded by the plan and normalized.

Reads the body the entitlement stage left (it may have rewritten it), and leaves:

- ``ctx.request``: the ``NormalizedRequest`` (typed body, outer items, candidates,
  clamped output, attachments) the work stage counts;
- the body's typed view decoded once (wire/request_body.py ``typed``): later stages read
  ``ctx.request``, and the forwarder decodes the body only when it must change it;
- ``ctx.body``: unchanged unless validation changed something (a clamped
  ``max_tokens``, normalized text): then the re-encoded request, so the backend reads
  exactly what screening and counting saw. A body nothing changed is never re-serialized.

A PDF attachment's text is read here, in a sandboxed worker process
(attachments/pdf.py: page, byte, time and memory limits), so that screening, masking and
token counting see it; a file that cannot be read within the limits is
``attachment_rejected``, and the gateway's own process never parses one.

The decision record gets the counts: hidden characters stripped, texts normalized, and
each clamped field with the value the client asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from ..config.schema import Config
from ..errors import Reason, Refusal
from ..pipeline.stage import BaseStage, Deciding
from ..pipeline.closers import Closers
from ..tokenize.registry import TokenizerRegistry
from ..validation.bounds import say_output_bound
from ..validation.request import Validator
from ..validation.result import NormalizedRequest
from ..wire.codec import json_encode as _encode

if TYPE_CHECKING:
    from ..attachments.pdf import PdfExtractor
    from ..pipeline.context import RequestContext


class ValidationStage(BaseStage):
    name = "validation"
    needs = frozenset({"route"})
    writes = frozenset({"request"})

    def __init__(self, vocab_sizes: dict[str, int], serves: dict[str, frozenset[str]] | None = None,
                 pdf_reader: PdfExtractor | None = None) -> None:
        self.validator = Validator(vocab_sizes)
        self.paths = frozenset(self.validator.routes)
        # model -> the routes it is declared for (models.<name>.serves)
        self.serves = serves
        self.pdf_reader = pdf_reader   # a started-on-first-use attachments.pdf.PdfExtractor

    def decide(self, ctx: RequestContext) -> Deciding:
        route = ctx.route   # a dialect's route validates as chat (stages/s05_dialect.py)
        path = route.validates if route is not None else ctx.path
        if path not in self.paths:
            return None  # a route without a body (GET /v1/models)
        plan = ctx.plan
        try:
            request = self.validator.validate(path, ctx.parsed, plan, ctx.features(plan))
        except Refusal as refusal:
            return refusal
        serves = self.serves
        if serves is not None and request.route not in serves[request.model]:
            return Refusal(Reason.model_route_unsupported,
                           f"The model `{request.model}` does not serve {path}", param="model")
        if request.attachments and any(a.data is not None for a in request.attachments):
            return self._with_files(ctx, request)   # read in a sandboxed worker: waited for
        self._admit(ctx, request)
        return None

    async def _with_files(self, ctx: RequestContext, request: NormalizedRequest) -> Refusal | None:
        read = await self._read_files(request)
        if isinstance(read, Refusal):
            return read
        self._admit(ctx, read)
        return None

    @staticmethod
    def _admit(ctx: RequestContext, request: NormalizedRequest) -> None:
        if request.changed:
            ctx.body = _encode(request.body)   # the next version: no view of the old bytes survives
        # later stages read the typed ``request`` instead of parsing again
        ctx.request = request
        ctx.model = request.model
        ctx.stream = request.stream
        if request.hidden_characters:
            ctx.note("hidden_characters", request.hidden_characters)
        if request.normalized_texts:
            ctx.note("normalized_texts", request.normalized_texts)
        if request.clamped:
            ctx.note("clamped", dict(request.clamped))
        if request.max_tokens_set:   # the gateway set or clamped the output bound: say so
            say_output_bound(ctx, request.max_tokens_set)
            if request.max_tokens_defaulted:
                ctx.note("max_tokens_default", request.max_tokens_set)


    async def _read_files(self, request: NormalizedRequest) -> NormalizedRequest | Refusal:
        from ..attachments.pdf import AttachmentRejected, PdfWorkerUnavailable

        reader = self.pdf_reader
        if reader is None:   # a stage built without a reader (build() always gives one)
            return Refusal(Reason.attachments_unavailable, "attachments cannot be read by this gateway")
        added = 0
        for attachment in request.attachments:
            data = attachment.data
            if data is None:
                continue
            where = _where(attachment.path)
            try:
                text = await reader.extract(data)
            except AttachmentRejected as exc:
                return Refusal(Reason.attachment_rejected, f"{where}: the file {exc.reason}", param=where)
            except PdfWorkerUnavailable:
                return Refusal(Reason.attachments_unavailable, "attachments cannot be read right now; retry shortly",
                               headers=((b"retry-after", b"1"),))
            attachment.data = None
            attachment.text = text
            # the text joins the prompt: bounded by its bytes (one token per byte at most)
            attachment.tokens += len(text.encode())
            added += len(text.encode())
        return msgspec.structs.replace(request, attachment_tokens=request.attachment_tokens + added)


def _where(path: tuple[str | int, ...] | None) -> str:
    if not path:
        return "attachment"
    _, i, _, j = path
    return f"messages[{i}].content[{j}].file.file_data"


def build(config: Config, tokenizers: TokenizerRegistry, closers: Closers) -> ValidationStage:
    from ..attachments.pdf import PdfExtractor

    reader = PdfExtractor()   # workers start on the first PDF, never before
    closers.add(reader.aclose)
    return ValidationStage({model: counter.vocab_size for model, counter in tokenizers.counters.items()},
                           {model: frozenset(spec.serves) for model, spec in config.models.items()}, reader)
