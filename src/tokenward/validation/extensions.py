"""vLLM's extension fields: each refused unless the plan's ``features`` name it.

Every extension field is typed in ``schemas`` (ranges checked by the decoder); this
module decides whether the caller may set it at all, and bounds what a range cannot:

- not enabled -> ``feature_not_entitled`` (``structured_output_denied`` for the
  structured-output family), with ``param`` naming the field; an explicit ``null`` sets
  nothing and passes. A field is enabled by its own name in ``plan.features``, or by
  ``vllm_extensions`` (the entitlement stage's switch for all of them) - except the
  regex-style constraints (``guided_regex``, ``guided_grammar``, ``structural_tag``,
  ``guided_whitespace_pattern``), which backends compile without a timeout and which
  only their own name enables, unless the regex is one the gateway can show is cheap to
  compile (regex_cost.py);
- enabled: lists are bounded by the plan's structural limits (``stop_token_ids`` and
  ``bad_words`` by ``max_stop``, ``allowed_token_ids`` by ``max_logit_bias``), token ids
  by the model's vocabulary, free-form JSON by ``max_schema_bytes`` / ``max_schema_depth``,
  templates and patterns by their length caps; regexes and grammars inside
  ``structured_outputs`` also need their own feature (``guided_regex``,
  ``guided_grammar``, ``structural_tag``, ``guided_whitespace_pattern``).

Fields and the feature that enables each are listed in docs/validation.md.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET
from msgspec.structs import astuple

from ..config.schema import PlanConfig
from ..errors import Reason, Refusal
from .bounded import decode_free_form, is_null
from .plan import feature_hint
from .findings import Findings
from .schemas import ChatCompletionRequest, CompletionRequest, EmbeddingRequest, VllmCommon, VllmSampling
from .regex_cost import cheap, why_not_cheap
from .structured import REGEX_FEATURE, check_schema, check_text_constraint, denied

MAX_STOP_CHARS: Final = 1024
MAX_CHOICES: Final = 256

STRUCTURED_FIELDS: Final = frozenset({
    "guided_json", "guided_regex", "guided_choice", "guided_grammar", "structural_tag",
    "guided_decoding_backend", "guided_whitespace_pattern", "structured_outputs",
})
# Enabled only by their own feature name, never by the ``vllm_extensions`` switch.
REGEX_STYLE_FIELDS: Final = frozenset({"guided_regex", "guided_grammar", "structural_tag", "guided_whitespace_pattern"})
ALL_EXTENSIONS: Final = "vllm_extensions"
_REGEX_FIELDS: Final = frozenset({"guided_regex", "guided_whitespace_pattern"})
_FREE_FORM: Final = frozenset({"kv_transfer_params", "vllm_xargs", "chat_template_kwargs", "mm_processor_kwargs"})


def _names(struct: type, *extra: str) -> tuple[str, ...]:
    return tuple(f.name for f in msgspec.structs.fields(struct)) + extra


EXTENSION_FIELDS: Final[dict[type, tuple[str, ...]]] = {
    ChatCompletionRequest: _names(VllmSampling, "echo", "add_generation_prompt", "continue_final_message",
                                  "documents", "chat_template", "chat_template_kwargs", "mm_processor_kwargs"),
    CompletionRequest: _names(VllmSampling, "prompt_embeds"),
    EmbeddingRequest: _names(VllmCommon),
}
# Where each extension field sits in ``msgspec.structs.astuple(req)``: one C call reads every
# field, where a getattr per field (~40) cost ~10K instructions a request.
_POSITIONS: Final[dict[type, tuple[int, ...]]] = {
    t: tuple([f.name for f in msgspec.structs.fields(t)].index(name) for name in names)
    for t, names in EXTENSION_FIELDS.items()}


def invalid(param: str, why: str) -> Refusal:
    return Refusal(Reason.invalid_field, f"{param}: {why}", param=param)


def check_token_ids(ids: list[int], param: str, vocab_size: int) -> None:
    if ids and (min(ids) < 0 or max(ids) >= vocab_size):
        raise invalid(param, f"token ids must be in [0, {vocab_size})")


def check_extensions(req: Any, plan: PlanConfig, features: frozenset[str], findings: Findings,
                     vocab_size: int) -> None:
    fields = astuple(req)
    unset = UNSET   # a local: mypyc reads an imported name from the module's dict per use
    for at in _POSITIONS[type(req)]:
        if fields[at] is not unset:
            break
    else:
        return  # the common case: a plain OpenAI request
    for name, at in zip(EXTENSION_FIELDS[type(req)], _POSITIONS[type(req)]):
        value = fields[at]
        if value is UNSET or value is None or (type(value) is msgspec.Raw and is_null(value)):
            continue
        if name not in features and (ALL_EXTENSIONS not in features
                                     or (name in REGEX_STYLE_FIELDS and not _cheap_regex(name, value))):
            hint = feature_hint(name, None if name in REGEX_STYLE_FIELDS else ALL_EXTENSIONS)
            if name in STRUCTURED_FIELDS:
                why = why_not_cheap(value) if name in _REGEX_FIELDS and isinstance(value, str) else None
                raise denied(name, f"{name} is not enabled on this plan{hint}"
                                   + (f" (and this regular expression is not cheap to compile: {why})" if why else ""))
            raise Refusal(Reason.feature_not_entitled, f"{name} is not enabled on this plan{hint}", param=name)
        _bound(name, value, plan, features, findings, vocab_size)


def _cheap_regex(name: str, value: Any) -> bool:
    """A guided regex (or whitespace pattern) the gateway can show is cheap to compile: the
    ``vllm_extensions`` switch admits it as it does the other fields (regex_cost.py)."""
    return name in _REGEX_FIELDS and isinstance(value, str) and cheap(value)


def _bound(name: str, value: Any, plan: PlanConfig, features: frozenset[str], findings: Findings,
           vocab_size: int) -> None:
    if name in STRUCTURED_FIELDS:
        findings.constrained = True
        _bound_structured(name, value, plan, features)
    elif name in _FREE_FORM:
        decode_free_form(value, name, plan.max_schema_bytes, plan.max_schema_depth)
    elif name in ("stop_token_ids", "bad_words"):
        if len(value) > plan.max_stop:
            raise invalid(name, f"at most {plan.max_stop} entries")
        if name == "stop_token_ids":
            check_token_ids(value, name, vocab_size)
        elif any(len(word) > MAX_STOP_CHARS for word in value):
            raise invalid(name, f"each entry at most {MAX_STOP_CHARS} characters")
    elif name == "allowed_token_ids":
        if len(value) > plan.max_logit_bias:
            raise invalid(name, f"at most {plan.max_logit_bias} entries")
        check_token_ids(value, name, vocab_size)
    elif name == "logits_processors":
        for i, item in enumerate(value):
            decode_free_form(item, f"{name}[{i}]", 1024, 4)
    elif name == "documents":
        if len(value) > plan.max_content_parts:
            raise invalid(name, f"at most {plan.max_content_parts} documents")
        for i, doc in enumerate(value):
            decode_free_form(doc, f"{name}[{i}]", plan.max_part_chars, plan.max_schema_depth)
            findings.extra_raw.append(bytes(doc))
    elif name == "chat_template":
        if len(value) > plan.max_part_chars:
            raise invalid(name, f"at most {plan.max_part_chars} characters")
        findings.extra_raw.append(value.encode())


def _bound_structured(name: str, value: Any, plan: PlanConfig, features: frozenset[str]) -> None:
    if name == "guided_json":
        check_schema(value, name, plan, features)
    elif name in ("guided_regex", "guided_whitespace_pattern"):
        check_text_constraint(value, name, plan, REGEX_FEATURE, features)
    elif name in ("guided_grammar", "structural_tag"):
        check_text_constraint(value, name, plan, name, features)
    elif name == "guided_choice":
        _bound_choices(value, name, plan)
    elif name == "structured_outputs":
        _bound_structured_outputs(value, plan, features)


def _bound_choices(choices: list[str], param: str, plan: PlanConfig) -> None:
    if len(choices) > MAX_CHOICES or sum(map(len, choices)) > plan.max_schema_bytes:
        raise invalid(param, f"at most {MAX_CHOICES} choices and {plan.max_schema_bytes} characters")


def _bound_structured_outputs(spec: Any, plan: PlanConfig, features: frozenset[str]) -> None:
    base = "structured_outputs"
    if spec.json is not UNSET:
        check_schema(spec.json, f"{base}.json", plan, features)
    for field, feature in (("regex", REGEX_FEATURE), ("whitespace_pattern", REGEX_FEATURE),
                           ("grammar", "guided_grammar"), ("structural_tag", "structural_tag")):
        text = getattr(spec, field)
        if text is not UNSET:
            check_text_constraint(text, f"{base}.{field}", plan, feature, features)
    if spec.choice is not UNSET:
        _bound_choices(spec.choice, f"{base}.choice", plan)
