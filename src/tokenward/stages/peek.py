"""The lenient look at a request body that the stages before validation share.

Identity (the ``user`` label) and entitlement (model, tools, features, system prompt) both
read a few fields of the body before validation decodes it strictly. They read them from
one decode, cached on the context: a 14 KB chat body costs ~7 us to scan, and scanning it
twice would cost that again. A body that does not fit even this lenient shape reads as
None here; validation refuses it with the precise error (json_too_deep, invalid_json, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext

# vLLM's request fields beyond OpenAI's API (sampling, guided decoding, templating).
VLLM_FIELDS = (
    "use_beam_search", "top_k", "min_p", "repetition_penalty", "length_penalty", "stop_token_ids",
    "include_stop_str_in_output", "ignore_eos", "min_tokens", "skip_special_tokens",
    "spaces_between_special_tokens", "truncate_prompt_tokens", "allowed_token_ids", "bad_words",
    "prompt_logprobs", "add_generation_prompt", "continue_final_message", "add_special_tokens",
    "documents", "chat_template", "chat_template_kwargs", "mm_processor_kwargs", "guided_json",
    "guided_regex", "guided_choice", "guided_grammar", "guided_decoding_backend",
    "guided_whitespace_pattern", "structured_outputs", "priority", "return_tokens_as_token_ids",
    "logits_processors", "vllm_xargs", "kv_transfer_params", "cache_salt", "structural_tag",
    "return_token_ids", "request_id", "prompt_embeds",
)


class _Name(msgspec.Struct):
    name: object = None


class _Tool(msgspec.Struct):
    type: object = None
    function: _Name | None = None
    custom: _Name | None = None


class _Message(msgspec.Struct):
    role: object = None


class _ResponseFormat(msgspec.Struct):
    type: object = None


# vLLM fields come last: one tuple comparison tells whether any of them is present.
BodyPeek = msgspec.defstruct("BodyPeek", [
    ("model", object, None),
    ("user", object, None),
    ("messages", "list[_Message] | None", None),
    ("tools", "list[_Tool] | None", None),
    ("functions", "list[_Name] | None", None),
    ("tool_choice", object, None),
    ("function_call", object, None),
    ("response_format", "_ResponseFormat | None", None),
    ("best_of", object, None),
    ("logprobs", object, None),
    ("top_logprobs", object, None),
    *((name, object, None) for name in VLLM_FIELDS),
], module=__name__)
_decode = msgspec.json.Decoder(BodyPeek).decode
_UNFIT = False   # cached on the context: this body was peeked at and does not fit


def decode_peek(body: bytes) -> "BodyPeek | None":
    try:
        return _decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def body_peek(ctx: "RequestContext") -> "BodyPeek | None":
    """The request body's peek, decoded at the first call for this body."""
    peek = ctx.peek
    if peek is None:
        peek = ctx.peek = decode_peek(ctx.body) if ctx.body else None
        if peek is None:
            ctx.peek = _UNFIT
            return None
    return peek if peek is not _UNFIT else None
