"""The shapes the lenient ``peek()`` of a request body decodes into (wire/request_body.py).

msgspec Structs live here, in a module that stays Python, so that ``request_body.py``
(what every request calls) can be compiled (tokenward/compiled.py says why a compiled
module may not hold a Struct).
"""

from __future__ import annotations

import enum
from typing import cast

import msgspec

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


class PeekMessage(msgspec.Struct):
    role: object = None


class _ResponseFormat(msgspec.Struct):
    type: object = None


class PeekFields(msgspec.Struct):
    """The members the stages before validation read, typed as loosely as ``peek()`` allows."""

    model: object = None
    user: object = None
    messages: list[PeekMessage] | None = None
    tools: list[_Tool] | None = None
    functions: list[_Name] | None = None
    tool_choice: object = None
    function_call: object = None
    response_format: _ResponseFormat | None = None
    best_of: object = None
    logprobs: object = None
    top_logprobs: object = None
    stream: object = None
    stream_options: object = None
    max_tokens: object = None
    max_completion_tokens: object = None
    n: object = None


# vLLM fields come last: one tuple comparison tells whether any of them is present
# (stages/s06_entitlement.py). The cast: msgspec types defstruct's result as type[Struct],
# though it is a subclass of the bases it is given.
BodyPeek = cast("type[PeekFields]", msgspec.defstruct(
    "BodyPeek", [(name, object, None) for name in VLLM_FIELDS], bases=(PeekFields,), module=__name__))
FIRST_VLLM_FIELD = len(BodyPeek.__struct_fields__) - len(VLLM_FIELDS)


class Unfit(enum.Enum):
    UNFIT = "this version was peeked at and does not fit the peek's shape"


