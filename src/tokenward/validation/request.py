"""Validate one request body for its route: decode, gate, bound, normalize, in that order.

Cheap refusals come first: the strict decode, the model, the extension gates and the
fan-out multipliers (``n``, ``best_of``, outer items), so a request that would fan out
is refused before anything proportional to its content is done. Then text is walked
(bounded, normalized in place), attachments decoded under caps, schemas checked.

``validate(path, body, plan, features)`` raises ``Refusal`` or returns the
``NormalizedRequest``; ``changed`` says whether the body must be re-encoded.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec
from msgspec import UNSET

from ..config.schema import PlanConfig
from ..errors import Reason, Refusal
from ..wire.request_body import RequestBody
from .bounded import decode_request
from .bounds import (
    candidates,
    check_common,
    clamp_output,
    normalize_string,
    prompt_embed_items,
    prompt_items,
)
from .extensions import check_extensions, invalid
from .messages import check_messages
from .normalize import Normalizer
from .findings import Findings
from .result import NormalizedRequest
from .schemas import ChatCompletionRequest, CompletionRequest, EmbeddingRequest
from .structured import check_standard

# the chat decoder is also the one the chat route's strict peek uses (validation/peek.py), so
# the typed view it leaves on the body is the one validation finds
CHAT_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(ChatCompletionRequest)
_DECODERS: dict[type, msgspec.json.Decoder[Any]] = {
    ChatCompletionRequest: CHAT_DECODER,
    CompletionRequest: msgspec.json.Decoder(CompletionRequest),
    EmbeddingRequest: msgspec.json.Decoder(EmbeddingRequest),
}


class Validator:
    """The per-gateway validator: which models exist and their vocabulary sizes."""

    def __init__(self, vocab_sizes: dict[str, int]) -> None:
        self.vocab_sizes = vocab_sizes
        self.routes: dict[str, Callable[[RequestBody | bytes, PlanConfig, frozenset[str]], NormalizedRequest]] = {
            "/v1/chat/completions": self.chat,
            "/v1/completions": self.completions,
            "/v1/embeddings": self.embeddings,
        }

    def validate(self, path: str, body: RequestBody | bytes, plan: PlanConfig,
                 features: frozenset[str]) -> NormalizedRequest:
        return self.routes[path](body, plan, features)

    def _start(self, schema: type, body: RequestBody | bytes) -> tuple[Any, int]:
        if not isinstance(body, RequestBody):
            body = RequestBody(body)
        try:
            req = decode_request(body, _DECODERS[schema])
        except Refusal as refusal:
            # A model that does not exist is the first thing to say, as OpenAI does; looked
            # at only on this error path, so a valid request pays nothing for it.
            model = _peeked_model(body) if refusal.reason is not Reason.invalid_json else None
            if isinstance(model, str):
                self._check_model(model)
            raise
        vocab = self._check_model(req.model)
        return req, vocab

    def _check_model(self, model: str) -> int:
        vocab = self.vocab_sizes.get(model)
        if vocab is None:
            raise Refusal(Reason.unknown_model, f"The model `{model}` does not exist", param="model")
        return vocab

    def chat(self, body: RequestBody | bytes, plan: PlanConfig, features: frozenset[str]) -> NormalizedRequest:
        req, vocab = self._start(ChatCompletionRequest, body)
        findings = Findings()
        check_extensions(req, plan, features, findings, vocab)
        cands = candidates(req, plan)
        max_out = clamp_output(req, plan, findings, ("max_tokens", "max_completion_tokens"))
        check_common(req, plan)
        _check_logit_bias(req, vocab)
        norm = Normalizer(plan.hidden_characters == "refuse")
        check_messages(req.messages, plan, norm, findings)
        check_standard(req, plan, features, findings)
        return _result("chat", req, 1, cands, max_out, norm, findings)

    def completions(self, body: RequestBody | bytes, plan: PlanConfig, features: frozenset[str]) -> NormalizedRequest:
        req, vocab = self._start(CompletionRequest, body)
        findings = Findings()
        check_extensions(req, plan, features, findings, vocab)
        cands = candidates(req, plan)
        max_out = clamp_output(req, plan, findings, ("max_tokens",))
        norm = Normalizer(plan.hidden_characters == "refuse")
        if req.prompt is not UNSET:
            items = prompt_items(req, "prompt", plan, norm, vocab)
        elif isinstance(req.prompt_embeds, (str, list)):
            items = 0
        else:
            raise invalid("prompt", "Missing required parameter: prompt")
        items = prompt_embed_items(req, plan, findings, items)
        normalize_string(req, "suffix", plan, norm)
        check_common(req, plan)
        _check_logit_bias(req, vocab)
        check_standard(req, plan, features, findings)
        return _result("completions", req, items, cands, max_out, norm, findings)

    def embeddings(self, body: RequestBody | bytes, plan: PlanConfig, features: frozenset[str]) -> NormalizedRequest:
        req, vocab = self._start(EmbeddingRequest, body)
        findings = Findings()
        check_extensions(req, plan, features, findings, vocab)
        norm = Normalizer(plan.hidden_characters == "refuse")
        items = prompt_items(req, "input", plan, norm, vocab)
        return _result("embeddings", req, items, 1, 0, norm, findings)


def _peeked_model(body: RequestBody) -> object:
    peek = body.peek()
    if peek is not None:
        return peek.model
    try:   # a body whose other members do not fit the peek: its model member alone
        model = body.members().get("model")
        return msgspec.json.decode(model) if isinstance(model, msgspec.Raw) else model
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def _check_logit_bias(req: Any, vocab: int) -> None:
    bias = req.logit_bias
    if bias:
        for key in bias:
            if int(key) >= vocab:
                raise invalid("logit_bias", f"token id {key} is outside the vocabulary (size {vocab})")


def _result(route: str, req: Any, items: int, cands: int, max_out: int, norm: Normalizer,
            findings: Findings) -> NormalizedRequest:
    attachments = tuple(findings.attachments)
    stream = echo = logprobs = include_usage = False
    best_of = 0
    if not isinstance(req, EmbeddingRequest):
        stream = req.stream is True
        options = req.stream_options
        include_usage = stream and options is not UNSET and options is not None and options.include_usage is True
        echo = req.echo is True or type(req.prompt_logprobs) is int
        logprobs = bool(req.logprobs)
        if isinstance(req, CompletionRequest) and isinstance(req.best_of, int):
            best_of = req.best_of
    return NormalizedRequest(
        route=route,
        model=req.model,
        body=req,
        outer_items=items,
        candidates=cands,
        max_output_tokens=max_out,
        stream=stream,
        include_usage=include_usage,
        echoes_prompt=echo,
        logprobs=logprobs,
        best_of=best_of,
        structured_output=findings.constrained,
        attachments=attachments,
        attachment_tokens=sum(a.tokens for a in attachments),
        extra_raw=tuple(findings.extra_raw),
        embed_tokens=tuple(findings.embed_tokens),
        hidden_characters=norm.hidden,
        normalized_texts=norm.changed,
        clamped=tuple(findings.clamped.items()),
        changed=bool(norm.changed or findings.clamped or findings.defaulted),
        max_tokens_set=findings.bound_set,
        max_tokens_defaulted=findings.defaulted,
    )
