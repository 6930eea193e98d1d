"""Property: every string a native upstream receives was seen by the screening stage.

Requests are drawn from the official SDKs' own request types (tests/dialects/sdk_strategies.py),
parsed as the gateway parses them; for each one it accepts, the body rendered for the
native upstream (dialects/*_doc.py ``render``) is walked, and every string in it is either
inside one of the texts screening reads (``Document.units``: what ``DialectRoute.texts``
hands the screening stage), or at a place docs/dialects.md classes as structure or opaque
state (an enum, an id, a name, a model, base64 state or media, a stop sequence). A string
anywhere else is a field the gateway forwards unread.
"""

from __future__ import annotations

import json
import typing
import warnings
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.dialects.sdk_strategies import from_sdk
from tokenward.dialects import messages_doc, messages_schema, responses_doc, responses_schema
from tokenward.dialects.messages_doc import Decisions
from tokenward.errors import Refusal

anthropic_beta = pytest.importorskip("anthropic.types.beta")
openai_responses = pytest.importorskip("openai.types.responses")

warnings.filterwarnings("ignore", category=DeprecationWarning)

def _typed_structure_keys() -> frozenset[str]:
    """The keys the dialect schemas type, wherever they can hold a string, only as an enum
    (``Literal``), an id (``StateId``), a tool name (``ToolName``) or opaque state
    (``Opaque``): structure, by the schema itself."""
    import msgspec

    from tokenward.dialects import common, messages_blocks, responses_items
    from tokenward.validation.schemas import ToolName

    kinds = (common.StateId, common.Opaque, ToolName)
    verdicts: dict[str, set[bool]] = {}
    for module in (messages_blocks, messages_schema, responses_items, responses_schema):
        for value in vars(module).values():
            if not (isinstance(value, type) and issubclass(value, msgspec.Struct)):
                continue
            hints = typing.get_type_hints(value, include_extras=True)
            for field in msgspec.structs.fields(value):
                strings = [m for m in _members(hints.get(field.name)) if _holds_str(m)]
                if strings:
                    verdicts.setdefault(field.encode_name, set()).update(
                        m in kinds or typing.get_origin(m) is typing.Literal for m in strings)
    return frozenset(key for key, seen in verdicts.items() if seen == {True})


def _members(hint: Any) -> list[Any]:
    if typing.get_origin(hint) is typing.Union:
        return [m for a in typing.get_args(hint) for m in _members(a)]
    return [hint]


def _holds_str(hint: Any) -> bool:
    if hint is str or typing.get_origin(hint) is typing.Literal:
        return True
    return typing.get_origin(hint) is typing.Annotated and typing.get_args(hint)[0] is str


# keys whose strings are structure or opaque state, never text a model reads (docs/dialects.md)
STRUCTURE = _typed_structure_keys() | frozenset({
    # discriminators, model and tool names (ToolName where the gateway types them), and the
    # identifiers the schemas keep as bounded short text
    "type", "model", "name", "namespace", "mode", "server_name", "mcp_server_name", "server_label", "version",
})
# a string list at these keys holds enums or stop strings
STRUCTURE_LISTS = frozenset({"stop_sequences", "include", "allowed_callers"})
# base64 media and opaque state under these parent types
OPAQUE_PARENTS = frozenset({"base64", "redacted_thinking"})


# (the object's own key, key): enums of one object whose key elsewhere holds text
STRUCTURE_PAIRS = frozenset({("reasoning", "context"), ("reasoning", "summary"), ("reasoning", "mode")})


def _leaves(node: Any, key: str = "", parent: dict[str, Any] | None = None, owner: str = ""
            ) -> Iterator[tuple[str, str, Any, str]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, k, node, key)
    elif isinstance(node, list):
        for v in node:
            yield from _leaves(v, key, parent, owner)
    elif isinstance(node, str):
        yield key, node, parent, owner


def _structure(key: str, parent: dict[str, Any] | None) -> bool:
    if key in STRUCTURE or key in STRUCTURE_LISTS:
        return True
    kind = parent.get("type") if isinstance(parent, dict) else None
    if key == "data" and kind in OPAQUE_PARENTS:
        return True
    # a source or image given by URL: remote media, refused by validation through the chat view
    return key in ("url", "image_url", "file_url", "file_data") and kind in ("url", "input_image", "input_file",
                                                                            None)


def _seen(value: str, texts: list[str]) -> bool:
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    return any(value in text or escaped in text for text in texts)


def _check(rendered: bytes, texts: list[str]) -> None:
    for key, value, parent, owner in _leaves(json.loads(rendered)):
        if not value or _structure(key, parent) or (owner, key) in STRUCTURE_PAIRS:
            continue
        assert _seen(value, texts), f"{key!r} = {value!r} goes to the backend unscreened"


_MESSAGES_HINTS = typing.get_type_hints(anthropic_beta.message_create_params.MessageCreateParamsNonStreaming,
                                        include_extras=True)
MESSAGES_BODIES = st.fixed_dictionaries(
    {"model": st.just("small-chat"), "max_tokens": st.integers(1, 64),
     "messages": st.lists(from_sdk(anthropic_beta.BetaMessageParam), min_size=1, max_size=3)},
    optional={k: from_sdk(_MESSAGES_HINTS[k], k) for k in (
        "system", "tools", "metadata", "tool_choice", "thinking", "output_config", "context_management",
        "mcp_servers", "container", "stop_sequences", "compaction", "speed", "service_tier")})

_RESPONSES_HINTS = typing.get_type_hints(openai_responses.response_create_params.ResponseCreateParamsNonStreaming,
                                         include_extras=True)
RESPONSES_BODIES = st.fixed_dictionaries(
    {"model": st.just("small-chat"), "max_output_tokens": st.integers(1, 64),
     "input": st.one_of(from_sdk(str, "input"),
                        st.lists(from_sdk(openai_responses.ResponseInputItemParam), min_size=1, max_size=3))},
    optional={k: from_sdk(_RESPONSES_HINTS[k], k) for k in (
        "instructions", "tools", "metadata", "tool_choice", "reasoning", "text", "prompt", "user",
        "safety_identifier", "prompt_cache_key", "include", "store", "previous_response_id", "conversation")})


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(MESSAGES_BODIES)
def test_every_string_a_native_messages_upstream_receives_was_screened(body):
    try:
        parsed = messages_schema.parse(json.dumps(body).encode())
    except Refusal as refusal:
        # a value may be refused; a field the SDK defines is never unknown to the gateway
        assert refusal.reason.name != "unknown_field", refusal.message
        assume(False)
        return
    doc = messages_doc.document(parsed)
    rendered = messages_doc.render(parsed, doc, Decisions(model=None, max_tokens=body["max_tokens"]))
    _check(rendered, [unit.text for unit in doc.units])


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(RESPONSES_BODIES)
def test_every_string_a_native_responses_upstream_receives_was_screened(body):
    try:
        parsed = responses_schema.parse(json.dumps(body).encode())
    except Refusal as refusal:
        assert refusal.reason.name != "unknown_field", refusal.message
        assume(False)
        return
    doc = responses_doc.document(parsed)
    rendered = responses_doc.render(parsed, doc, Decisions(model=None, max_tokens=body["max_output_tokens"]))
    _check(rendered, [unit.text for unit in doc.units])
