"""Clamps and fan-out bounds from the caller's plan (interfaces.md names the fields).

Every multiplier a caller controls is bounded before any work is estimated, so no request
can fan out behind a small body (the vLLM advisories: ``n`` fanned out synchronously,
each element of a ``prompt`` list or of ``prompt_embeds`` became an engine request):

- ``max_tokens`` / ``max_completion_tokens``: required (``max_tokens_required``) unless the
  plan has ``default_max_tokens``, which then fills ``max_tokens``; clamped to
  ``plan.max_output_tokens`` (the body is rewritten, not refused);
- ``n`` <= ``plan.max_n`` (``choices_limit``);
- ``best_of`` > 1: refused unless ``plan.allow_best_of``, then <= ``plan.max_best_of``
  (``best_of_denied``) and >= ``n``; the candidate count is max(n, best_of);
- outer prompt list / embedding inputs / ``prompt_embeds`` entries <=
  ``plan.max_outer_items`` (``outer_item_limit``), checked before any item is read;
- ``stop`` <= ``plan.max_stop`` entries of <= 1024 characters, ``logit_bias`` <=
  ``plan.max_logit_bias`` entries, ``tools`` <= ``plan.max_tools``, ``min_tokens`` <= the
  clamped output (each ``invalid_field``).
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from ..config.schema import PlanConfig
from ..errors import Reason, Refusal
from .extensions import MAX_STOP_CHARS, check_token_ids, invalid
from .messages import too_long
from .normalize import Normalizer
from .findings import Findings
from .schemas import CompletionRequest

# An upper bound of tokens per byte of a prompt embedding: assumes 16-bit values and a
# hidden size of at least 1024 (documented in docs/validation.md).
_EMBED_BYTES_PER_TOKEN = 2048
_PROMPT_SHAPES = "a string, an array of strings, an array of token ids, or an array of token-id arrays"


def clamp_output(req: Any, plan: PlanConfig, findings: Findings, fields: tuple[str, ...]) -> int:
    """The clamped output cap per choice; rewrites each field set above the plan's cap, and
    fills a missing bound with ``plan.default_max_tokens`` (capped too) when it has one."""
    cap = plan.max_output_tokens
    asked = 0
    given = False
    for field in fields:
        value = getattr(req, field)
        if value is UNSET or value is None:
            continue
        given = True
        if value > cap:
            findings.clamped[field] = value
            setattr(req, field, cap)
            findings.bound_set = cap
            value = cap
        asked = max(asked, value)
    if not given and plan.default_max_tokens is not None and cap > 0:
        asked = min(plan.default_max_tokens, cap)
        setattr(req, fields[0], asked)
        findings.bound_set = asked
        findings.defaulted = True
    if asked == 0:
        # the operator's way out is in the message too: the plan can fill the bound itself
        hint = "" if given else "; or the plan's operator can set default_max_tokens to fill it in"
        raise Refusal(Reason.max_tokens_required,
                      f"max_tokens is required (at most {cap} on this plan){hint}", param=fields[0])
    min_tokens = getattr(req, "min_tokens", None)
    if isinstance(min_tokens, int) and min_tokens > asked:
        raise invalid("min_tokens", f"must not exceed max_tokens ({asked})")
    return asked


MAX_TOKENS_HEADER = b"x-tokenward-max-tokens"


def say_output_bound(ctx: Any, value: int) -> None:
    """The answer's ``x-tokenward-max-tokens: N``: the output bound the gateway set or
    clamped, the last one a stage wrote (validation, then a screening restriction)."""
    headers = ctx.response_headers
    headers[:] = [h for h in headers if h[0] != MAX_TOKENS_HEADER]
    headers.append((MAX_TOKENS_HEADER, b"%d" % value))


def candidates(req: Any, plan: PlanConfig) -> int:
    n = req.n if isinstance(req.n, int) else 1
    if n > plan.max_n:
        raise Refusal(Reason.choices_limit, f"n must be at most {plan.max_n} on this plan", param="n")
    # only a completion has best_of: a getattr that misses raises and catches an AttributeError
    best_of = req.best_of if isinstance(req, CompletionRequest) else None
    if not isinstance(best_of, int):
        return n
    # best_of 1 asks for nothing more than the default, so it needs no permission.
    if best_of > 1 and not plan.allow_best_of:
        raise Refusal(Reason.best_of_denied, "best_of is not allowed on this plan", param="best_of")
    if best_of > max(plan.max_best_of, 1):
        raise Refusal(Reason.best_of_denied, f"best_of must be at most {plan.max_best_of} on this plan",
                      param="best_of")
    if best_of < n:
        raise invalid("best_of", "must be greater than or equal to n")
    return max(n, best_of)


def check_common(req: Any, plan: PlanConfig) -> None:
    stop = req.stop
    if isinstance(stop, str):
        if len(stop) > MAX_STOP_CHARS:
            raise too_long("stop", MAX_STOP_CHARS)
    elif stop:
        if len(stop) > plan.max_stop:
            raise invalid("stop", f"at most {plan.max_stop} stop sequences on this plan")
        for i, seq in enumerate(stop):
            if len(seq) > MAX_STOP_CHARS:
                raise too_long(f"stop[{i}]", MAX_STOP_CHARS)
    bias = req.logit_bias
    if bias and len(bias) > plan.max_logit_bias:
        raise invalid("logit_bias", f"at most {plan.max_logit_bias} entries on this plan")
    tools = getattr(req, "tools", None)
    if tools and len(tools) > plan.max_tools:
        raise invalid("tools", f"at most {plan.max_tools} tools on this plan")


def prompt_items(req: Any, field: str, plan: PlanConfig, norm: Normalizer, vocab_size: int) -> int:
    """Bound and normalize a prompt / embedding input in place; returns its item count."""
    value = getattr(req, field)
    cap = plan.max_part_chars
    if type(value) is str:
        if len(value) > cap:
            raise too_long(field, cap)
        if not value.isascii():
            setattr(req, field, norm.text(value, field))
        return 1
    if not value:
        raise invalid(field, f"must be {_PROMPT_SHAPES}, and not empty")
    kinds = set(map(type, value))
    if kinds == {int}:
        check_token_ids(value, field, vocab_size)
        return 1
    if len(kinds) != 1:
        raise invalid(field, f"must be {_PROMPT_SHAPES}")
    if len(value) > plan.max_outer_items:
        raise Refusal(Reason.outer_item_limit,
                      f"{field} has {len(value)} entries; at most {plan.max_outer_items} on this plan",
                      param=field)
    if kinds == {str}:
        for i, text in enumerate(value):
            if len(text) > cap:
                raise too_long(f"{field}[{i}]", cap)
            if not text.isascii():
                value[i] = norm.text(text, f"{field}[{i}]")
    else:
        for i, ids in enumerate(value):
            if not ids:
                raise invalid(f"{field}[{i}]", "a token-id array must not be empty")
            check_token_ids(ids, f"{field}[{i}]", vocab_size)
    return len(value)


def normalize_string(req: Any, field: str, plan: PlanConfig, norm: Normalizer) -> None:
    value = getattr(req, field)
    if type(value) is str:
        if len(value) > plan.max_part_chars:
            raise too_long(field, plan.max_part_chars)
        if not value.isascii():
            setattr(req, field, norm.text(value, field))


def prompt_embed_items(req: Any, plan: PlanConfig, findings: Findings, items: int) -> int:
    """Entries of vLLM's ``prompt_embeds`` add to the outer items (each is an engine request)."""
    embeds = req.prompt_embeds
    if embeds is UNSET or embeds is None:
        return items
    entries = [embeds] if isinstance(embeds, str) else embeds
    if not entries and not items:
        # no prompt either: a request with no input at all, which no engine can run
        raise invalid("prompt_embeds", "must not be empty when there is no prompt")
    total = items + len(entries)
    if total > plan.max_outer_items:
        raise Refusal(Reason.outer_item_limit,
                      f"prompt_embeds brings the request to {total} items; at most {plan.max_outer_items}",
                      param="prompt_embeds")
    cap = plan.max_attachment_bytes
    for i, entry in enumerate(entries):
        if not entry:
            raise invalid(f"prompt_embeds[{i}]" if embeds is entries else "prompt_embeds", "an empty tensor")
        size = len(entry) * 3 // 4
        if size > cap:
            raise Refusal(Reason.attachment_rejected, f"prompt_embeds[{i}] is larger than {cap} bytes",
                          param=f"prompt_embeds[{i}]")
        findings.embed_tokens.append(-(-size // _EMBED_BYTES_PER_TOKEN))
    return total
