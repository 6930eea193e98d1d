"""Every field of the official SDKs' request types is known to the dialect schemas.

Walks the request TypedDicts of the pinned ``anthropic`` (beta types included: the CLIs
send beta fields) and ``openai`` packages, and checks each object type against the schema
that parses it: matched by its ``type`` tag (or, for untagged objects, by the table below),
every field the SDK defines must be a field of the gateway's Struct, or the whole object
must be one that a documented rule covers (server-side blocks, items and tools, kept as
screened JSON; refused blocks). A new SDK version that adds a field fails here, naming it,
rather than a user's request failing with ``unknown_field``.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any, Iterator

import msgspec
import pytest
from typing_extensions import is_typeddict

from tokenward.dialects import messages_blocks, messages_schema, responses_items, responses_schema

anthropic_beta = pytest.importorskip("anthropic.types.beta")
openai_responses = pytest.importorskip("openai.types.responses")


def _structs(*modules: Any) -> dict[str, list[type[msgspec.Struct]]]:
    """tag -> the Structs with that tag (a tag can name a block and a source alike): the
    Struct's own tag, or the literal of its ``type`` field (objects decoded one by one)."""
    found: dict[str, list[type[msgspec.Struct]]] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, msgspec.Struct):
                tag = value.__struct_config__.tag
                tags = [tag] if isinstance(tag, str) else _literals(typing.get_type_hints(value).get("type"))
                for one in tags:
                    found.setdefault(one, []).append(value)
    return found


def _literals(hint: Any) -> list[str]:
    if typing.get_origin(hint) is typing.Literal:
        return [a for a in typing.get_args(hint) if isinstance(a, str)]
    return [v for a in typing.get_args(hint) for v in _literals(a)] if typing.get_origin(hint) else []


def _fields(struct: type[msgspec.Struct]) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(struct)}


def _walk(tp: Any, seen: set[Any], whole: frozenset[str] = frozenset()) -> Iterator[type]:
    """Every TypedDict reachable from ``tp``, not descending into those a rule covers whole
    (by type tag or class name in ``whole``): they are yielded, their insides are not."""
    origin = typing.get_origin(tp)
    if origin is not None:
        for arg in typing.get_args(tp):
            if not isinstance(arg, (str, int, bool)) and arg is not None:
                yield from _walk(arg, seen, whole)
        return
    if isinstance(tp, type) and is_typeddict(tp) and tp not in seen:
        seen.add(tp)
        yield tp
        if tp.__name__ in whole or any(tag in whole for tag in _tags(tp)):
            return
        for hint in typing.get_type_hints(tp, include_extras=True).values():
            yield from _walk(hint, seen, whole)


def _tags(tp: type) -> list[str]:
    hint = typing.get_type_hints(tp, include_extras=True).get("type")
    out: list[str] = []

    def collect(h: Any) -> None:
        if typing.get_origin(h) is typing.Literal:
            out.extend(a for a in typing.get_args(h) if isinstance(a, str))
        elif typing.get_origin(h) is not None:
            for a in typing.get_args(h):
                collect(a)
    collect(hint)
    return out


def _check(roots: list[Any], structs: dict[str, list[type[msgspec.Struct]]], untagged: dict[str, type],
           whole: set[str], skip_fields: set[str]) -> list[str]:
    seen: set[Any] = set()
    rules = frozenset(whole)
    typed = list(dict.fromkeys(t for root in roots for t in _walk(root, seen, rules)))
    missing = []
    for tp in typed:
        if tp.__name__ in whole or any(tag in whole for tag in _tags(tp)):
            continue
        fields = set(typing.get_type_hints(tp, include_extras=True)) - skip_fields
        tags = _tags(tp)
        candidates = [s for tag in tags for s in structs.get(tag, ())]
        if tp.__name__ in untagged:
            candidates.append(untagged[tp.__name__])
        if not candidates:
            missing.append(f"{tp.__name__} (type {tags or 'untagged'}): no schema parses it")
            continue
        known = set().union(*(_fields(c) for c in candidates))
        unknown = sorted(fields - known - {"type"})
        if unknown:
            missing.append(f"{tp.__name__}: {unknown} unknown")
    return missing


def test_every_field_of_the_anthropic_sdks_messages_request_is_known():
    untagged = {
        "MessageCreateParamsNonStreaming": messages_schema.MessagesRequest,
        "MessageCreateParamsStreaming": messages_schema.MessagesRequest,
        "BetaUserMessageParam": messages_schema.Message, "BetaAssistantMessageParam": messages_schema.Message,
        "BetaSystemMessageParam": messages_schema.Message, "BetaToolParam": messages_schema.ClientTool,
        "BetaMetadataParam": messages_schema.Metadata, "BetaOutputConfigParam": messages_schema.OutputConfig,
        "BetaCacheControlEphemeralParam": messages_blocks.CacheControl,
        "BetaContextManagementConfigParam": messages_schema.ContextManagement,
        "BetaCitationsConfigParamParam": messages_blocks.CitationsConfig,
        "BetaImageTransformationsParam": messages_blocks.ImageTransformations,
        "BetaThinkingBlockBindingParam": messages_schema.BlockBinding,
        "BetaSystemMessageOutputConfigParam": messages_schema.SystemOutputConfig,
        "BetaContainerParams": messages_schema.ContainerParams, "BetaSkillParams": messages_schema.Skill,
        "BetaDiagnosticsParam": messages_schema.Diagnostics,
        "InputSchemaTyped": messages_schema.ClientTool,   # kept whole as the tool's JSON schema
    }
    # objects a documented rule covers whole: server-side (kept as screened JSON) or refused
    whole = ({c.__struct_config__.tag for c in messages_blocks.SERVER_BLOCKS}
             | {"browser_state", "container_upload", "tool_addition", "tool_removal", "billing_policy",
                "compact_20260112", "clear_tool_uses_20250919", "clear_thinking_20251015",
                # by class name: a tool's JSON schema (screened as JSON), refused fallbacks, an MCP server
                "InputSchemaTyped", "BetaFallbackParam", "BetaFallbackCreditTokenParam",
                "BetaRequestMCPServerURLDefinitionParam"}
             | {t for t in _all_tags(anthropic_beta.message_create_params.MessageCreateParamsNonStreaming)
                if t.startswith(messages_schema.SERVER_TOOL_PREFIXES)})
    missing = _check([anthropic_beta.message_create_params.MessageCreateParamsNonStreaming],
                     _structs(messages_blocks, messages_schema), untagged, whole,
                     skip_fields={"betas"})   # the SDK sends betas as the anthropic-beta header
    assert not missing, "\n".join(missing)


def test_every_field_of_the_openai_sdks_responses_request_is_known():
    untagged = {
        "ResponseCreateParamsNonStreaming": responses_schema.ResponsesRequest,
        "ResponseCreateParamsStreaming": responses_schema.ResponsesRequest,
        "EasyInputMessageParam": responses_items.MessageItem, "Message": responses_items.MessageItem,
        "ResponseOutputMessageParam": responses_items.MessageItem,
        "ResponseTextConfigParam": responses_schema.TextConfig, "Reasoning": responses_schema.Reasoning,
        "StreamOptions": responses_schema.StreamOptions, "ResponsePromptParam": responses_schema.PromptRef,
        "ResponseConversationParamParam": responses_schema.ConversationRef,
        "PromptCacheOptions": responses_schema.PromptCacheOptions, "Image": responses_schema.ImageOptions,
        "BackgroundOptions": responses_schema.BackgroundOptions,
        "ContextManagement": responses_schema.ContextManagement,
        "PromptCacheBreakpoint": responses_items.CacheBreakpoint,
        "ItemReference": responses_items.ItemReference,
    }
    whole = (set(responses_items.SERVER_ITEMS) | set(responses_schema.BUILTIN_TOOLS)
             | set(responses_schema.SERVER_CHOICES)
             | {"allowed_tools", "web_search_preview_2025_03_11", "web_search_2025_08_26"})
    missing = _check([openai_responses.response_create_params.ResponseCreateParamsNonStreaming],
                     _structs(responses_items, responses_schema), untagged, whole,
                     skip_fields={"access_programs", "moderation"})   # dropped by a rule (TOP_RULES)
    # a Logprob's fields: the log probabilities of an earlier answer, dropped by a rule
    missing = [m for m in missing if not m.startswith(("Logprob", "AccessPrograms", "Moderation"))]
    assert not missing, "\n".join(missing)


def _all_tags(root: Any) -> set[str]:
    return {tag for tp in _walk(root, set()) for tag in _tags(tp)}
