"""Strict request schemas for the public routes, as msgspec Structs.

Every Struct forbids unknown fields, so ``{"foo": 1}`` anywhere in a request fails the
decode (``unknown_field``), and every type and static range is checked by the decoder in
one pass (``invalid_field``). Limits that depend on the caller's plan (how many messages,
how long a part, how many tools) are checked afterwards by ``bounds``.

Optional fields default to ``UNSET``, not ``None``: a field the client sent as ``null``
stays ``null`` when a changed request is re-encoded, and an absent one stays absent, so
what the backend reads means what the client sent. Free-form JSON (tool parameter
schemas, ``json_schema.schema``, some vLLM fields) is kept as ``msgspec.Raw``: forwarded
byte for byte and checked by ``bounded.decode_free_form`` under depth and size caps.

vLLM's extension fields are declared here (so they are typed) but refused unless the
plan enables each one (``extensions``).
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar, Union

import msgspec
from msgspec import UNSET, Meta, Raw, UnsetType

T = TypeVar("T")
# A top-level OpenAI parameter: absent, null, or a value.
Opt = Union[T, None, UnsetType]

ShortText = Annotated[str, Meta(max_length=256)]
# a client's partition of the engine's prefix cache: folded into the gateway's salt, never
# forwarded as typed (upstream/salt.py); printable ASCII, so no control byte is ever taken
CacheSalt = Annotated[str, Meta(min_length=1, max_length=256, pattern=r"\A[!-~]+\Z")]
Identifier = Annotated[str, Meta(min_length=1, max_length=256)]
ToolName = Annotated[str, Meta(pattern="^[a-zA-Z0-9_-]{1,64}$")]
TokenId = Annotated[int, Meta(ge=0)]
Penalty = Annotated[float, Meta(ge=-2.0, le=2.0)]
PositiveInt = Annotated[int, Meta(ge=1)]
Seed = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
LogitBias = dict[Annotated[str, Meta(pattern="^[0-9]{1,10}$")], Annotated[int, Meta(ge=-100, le=100)]]
Stop = Union[str, list[str]]
# A prompt / embedding input: a string, strings, token ids, or lists of token ids. msgspec
# allows one array type per union, so the list's homogeneity is checked by ``bounds``.
PromptInput = Union[str, list[Union[str, int, list[int]]]]
# Free-form JSON, kept as bytes. msgspec cannot put Raw in a union with None: a null is
# kept as the raw bytes ``null`` (see ``bounded.is_null``).
RawJson = Union[Raw, UnsetType]


class Strict(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, gc=False):
    """Base of every request Struct: unknown fields are an error."""


# -- content parts ---------------------------------------------------------------------


class TextPart(Strict, tag_field="type", tag="text", kw_only=True):
    text: str


class ImageURL(Strict, kw_only=True):
    url: str
    detail: Union[Literal["auto", "low", "high"], UnsetType] = UNSET


class ImagePart(Strict, tag_field="type", tag="image_url", kw_only=True):
    image_url: ImageURL


class InputAudio(Strict, kw_only=True):
    data: str
    format: Literal["wav", "mp3"]


class AudioPart(Strict, tag_field="type", tag="input_audio", kw_only=True):
    input_audio: InputAudio


class FileRef(Strict, kw_only=True):
    file_data: Union[str, UnsetType] = UNSET
    file_id: Union[Identifier, UnsetType] = UNSET
    filename: Union[ShortText, UnsetType] = UNSET


class FilePart(Strict, tag_field="type", tag="file", kw_only=True):
    file: FileRef


class RefusalPart(Strict, tag_field="type", tag="refusal", kw_only=True):
    refusal: str


UserPart = Union[TextPart, ImagePart, AudioPart, FilePart]
AssistantPart = Union[TextPart, RefusalPart]
TextContent = Union[str, list[TextPart]]

# -- messages --------------------------------------------------------------------------


class FunctionCall(Strict, kw_only=True):
    name: ToolName
    arguments: str


class ToolCall(Strict, kw_only=True):
    id: Identifier
    type: Literal["function"]
    function: FunctionCall


class AudioRef(Strict, kw_only=True):
    id: Identifier


class UrlCitation(Strict, kw_only=True):
    start_index: int
    end_index: int
    title: str
    url: str


class Annotation(Strict, kw_only=True):
    type: Literal["url_citation"]
    url_citation: UrlCitation


class SystemMessage(Strict, tag_field="role", tag="system", kw_only=True):
    content: TextContent
    name: Union[ShortText, UnsetType] = UNSET


class DeveloperMessage(SystemMessage, tag="developer", kw_only=True):
    pass


class UserMessage(Strict, tag_field="role", tag="user", kw_only=True):
    content: Union[str, list[UserPart]]
    name: Union[ShortText, UnsetType] = UNSET


class AssistantMessage(Strict, tag_field="role", tag="assistant", kw_only=True):
    content: Opt[Union[str, list[AssistantPart]]] = UNSET
    name: Union[ShortText, UnsetType] = UNSET
    refusal: Opt[str] = UNSET
    tool_calls: Opt[list[ToolCall]] = UNSET
    function_call: Opt[FunctionCall] = UNSET
    audio: Opt[AudioRef] = UNSET
    annotations: Opt[list[Annotation]] = UNSET


class ToolMessage(Strict, tag_field="role", tag="tool", kw_only=True):
    content: TextContent
    tool_call_id: Identifier


Message = Union[SystemMessage, DeveloperMessage, UserMessage, AssistantMessage, ToolMessage]

# -- tools, structured output, streaming ------------------------------------------------


class FunctionDef(Strict, kw_only=True):
    name: ToolName
    description: Union[str, UnsetType] = UNSET
    parameters: Union[Raw, UnsetType] = UNSET
    strict: Opt[bool] = UNSET


class Tool(Strict, kw_only=True):
    type: Literal["function"]
    function: FunctionDef


class ToolChoiceFunction(Strict, kw_only=True):
    name: ToolName


class NamedToolChoice(Strict, kw_only=True):
    type: Literal["function"]
    function: ToolChoiceFunction


ToolChoice = Union[Literal["none", "auto", "required"], NamedToolChoice]


class TextFormat(Strict, tag_field="type", tag="text", kw_only=True):
    pass


class JsonObjectFormat(Strict, tag_field="type", tag="json_object", kw_only=True):
    pass


class JsonSchemaSpec(Strict, kw_only=True):
    name: ToolName
    description: Union[str, UnsetType] = UNSET
    schema: Union[Raw, UnsetType] = UNSET
    strict: Opt[bool] = UNSET


class JsonSchemaFormat(Strict, tag_field="type", tag="json_schema", kw_only=True):
    json_schema: JsonSchemaSpec


ResponseFormat = Union[TextFormat, JsonObjectFormat, JsonSchemaFormat]


class StreamOptions(Strict, kw_only=True):
    include_usage: Opt[bool] = UNSET
    include_obfuscation: Opt[bool] = UNSET


class StructuredOutputs(Strict, kw_only=True):
    """vLLM's ``structured_outputs`` object (its newer spelling of the guided_* fields)."""

    json: Union[Raw, UnsetType] = UNSET
    regex: Union[str, UnsetType] = UNSET
    choice: Union[list[str], UnsetType] = UNSET
    grammar: Union[str, UnsetType] = UNSET
    json_object: Union[bool, UnsetType] = UNSET
    structural_tag: Union[str, UnsetType] = UNSET
    whitespace_pattern: Union[str, UnsetType] = UNSET
    disable_any_whitespace: Union[bool, UnsetType] = UNSET
    disable_additional_properties: Union[bool, UnsetType] = UNSET
    disable_fallback: Union[bool, UnsetType] = UNSET


# -- vLLM extension fields (refused unless the plan enables each, see ``extensions``) ----


class VllmCommon(Strict, kw_only=True):
    priority: Opt[Annotated[int, Meta(ge=0)]] = UNSET
    request_id: Opt[ShortText] = UNSET
    truncate_prompt_tokens: Opt[Annotated[int, Meta(ge=-1)]] = UNSET
    add_special_tokens: Opt[bool] = UNSET


class VllmSampling(VllmCommon, kw_only=True):
    top_k: Opt[Annotated[int, Meta(ge=-1)]] = UNSET
    min_p: Opt[Annotated[float, Meta(ge=0.0, le=1.0)]] = UNSET
    repetition_penalty: Opt[Annotated[float, Meta(gt=0.0, le=2.0)]] = UNSET
    length_penalty: Opt[Annotated[float, Meta(ge=-10.0, le=10.0)]] = UNSET
    use_beam_search: Opt[bool] = UNSET
    min_tokens: Opt[Annotated[int, Meta(ge=0)]] = UNSET
    ignore_eos: Opt[bool] = UNSET
    stop_token_ids: Opt[list[TokenId]] = UNSET
    bad_words: Opt[list[str]] = UNSET
    include_stop_str_in_output: Opt[bool] = UNSET
    skip_special_tokens: Opt[bool] = UNSET
    spaces_between_special_tokens: Opt[bool] = UNSET
    prompt_logprobs: Opt[Annotated[int, Meta(ge=0, le=20)]] = UNSET
    allowed_token_ids: Opt[list[TokenId]] = UNSET
    guided_json: RawJson = UNSET
    guided_regex: Opt[str] = UNSET
    guided_choice: Opt[list[str]] = UNSET
    guided_grammar: Opt[str] = UNSET
    structural_tag: Opt[str] = UNSET
    guided_decoding_backend: Opt[ShortText] = UNSET
    guided_whitespace_pattern: Opt[str] = UNSET
    structured_outputs: Opt[StructuredOutputs] = UNSET
    logits_processors: Opt[Annotated[list[Raw], Meta(max_length=8)]] = UNSET
    return_tokens_as_token_ids: Opt[bool] = UNSET
    return_token_ids: Opt[bool] = UNSET
    cache_salt: Opt[CacheSalt] = UNSET
    kv_transfer_params: RawJson = UNSET
    vllm_xargs: RawJson = UNSET


# -- the three routes ----------------------------------------------------------------


class GenerationRequest(VllmSampling, kw_only=True):
    """The OpenAI fields chat and completions share, with the same bounds."""

    model: Identifier
    frequency_penalty: Opt[Penalty] = UNSET
    presence_penalty: Opt[Penalty] = UNSET
    logit_bias: Opt[LogitBias] = UNSET
    max_tokens: Opt[PositiveInt] = UNSET
    n: Opt[PositiveInt] = UNSET
    seed: Opt[Seed] = UNSET
    stop: Opt[Stop] = UNSET
    stream: Opt[bool] = UNSET
    stream_options: Opt[StreamOptions] = UNSET
    temperature: Opt[Annotated[float, Meta(ge=0.0, le=2.0)]] = UNSET
    top_p: Opt[Annotated[float, Meta(ge=0.0, le=1.0)]] = UNSET
    user: Opt[ShortText] = UNSET
    response_format: Opt[ResponseFormat] = UNSET  # vLLM accepts it on completions too


class ChatCompletionRequest(GenerationRequest, kw_only=True):
    messages: Annotated[list[Message], Meta(min_length=1)]
    logprobs: Opt[bool] = UNSET
    top_logprobs: Opt[Annotated[int, Meta(ge=0, le=20)]] = UNSET
    max_completion_tokens: Opt[PositiveInt] = UNSET
    tools: Opt[list[Tool]] = UNSET
    tool_choice: Opt[ToolChoice] = UNSET
    parallel_tool_calls: Opt[bool] = UNSET
    metadata: Opt[Annotated[dict[Annotated[str, Meta(max_length=64)], Annotated[str, Meta(max_length=512)]],
                            Meta(max_length=16)]] = UNSET
    store: Opt[bool] = UNSET
    service_tier: Opt[Literal["auto", "default", "flex", "scale", "priority"]] = UNSET
    reasoning_effort: Opt[Literal["minimal", "low", "medium", "high"]] = UNSET
    modalities: Opt[list[Literal["text"]]] = UNSET
    prompt_cache_key: Opt[ShortText] = UNSET
    safety_identifier: Opt[ShortText] = UNSET
    # vLLM chat-only extensions
    echo: Opt[bool] = UNSET
    add_generation_prompt: Opt[bool] = UNSET
    continue_final_message: Opt[bool] = UNSET
    documents: Opt[list[Raw]] = UNSET
    chat_template: Opt[str] = UNSET
    chat_template_kwargs: RawJson = UNSET
    mm_processor_kwargs: RawJson = UNSET


class CompletionRequest(GenerationRequest, kw_only=True):
    # Required unless vLLM's prompt_embeds is enabled and given (checked by ``request``).
    prompt: Union[PromptInput, UnsetType] = UNSET
    best_of: Opt[PositiveInt] = UNSET
    echo: Opt[bool] = UNSET
    logprobs: Opt[Annotated[int, Meta(ge=0, le=5)]] = UNSET
    suffix: Opt[str] = UNSET
    # vLLM completions-only extension
    prompt_embeds: Opt[Union[str, list[str]]] = UNSET


class EmbeddingRequest(VllmCommon, kw_only=True):
    model: Identifier
    input: PromptInput
    dimensions: Opt[PositiveInt] = UNSET
    encoding_format: Opt[Literal["float", "base64"]] = UNSET
    user: Opt[ShortText] = UNSET


ROUTE_SCHEMAS: dict[str, type[Strict]] = {
    "/v1/chat/completions": ChatCompletionRequest,
    "/v1/completions": CompletionRequest,
    "/v1/embeddings": EmbeddingRequest,
}
