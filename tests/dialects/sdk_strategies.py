"""Hypothesis strategies that build request bodies from the official SDKs' request types.

The ``anthropic`` and ``openai`` packages (pinned in the test extra) describe every request
as TypedDicts; ``from_sdk(tp)`` walks one and draws JSON values of its shape: required keys
always, optional ones sometimes, each union's members, literals, lists of up to two
elements. Strings are drawn by what their key means (ids, base64 state, URLs, free text), so
that what the gateway parses strictly is mostly accepted and the property tests reach deep.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any

from hypothesis import strategies as st
from typing_extensions import is_typeddict

MAX_DEPTH = 7
TEXT = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), min_size=1, max_size=24)
ID = st.from_regex(r"\A[a-z]{2,6}_[A-Za-z0-9]{4,12}\Z")
BASE64 = st.from_regex(r"\A[A-Za-z0-9+/]{4,40}={0,2}\Z")
NAME = st.from_regex(r"\A[a-z][a-z0-9_]{0,15}\Z")

# keys whose strings are not free text, and what they hold
_BY_KEY: dict[str, st.SearchStrategy[str]] = {
    "id": ID, "tool_use_id": ID, "call_id": ID, "file_id": ID, "container_id": ID, "caller_id": ID,
    "previous_response_id": ID, "approval_request_id": ID, "tool_id": ID, "skill_id": ID,
    "signature": BASE64, "encrypted_content": BASE64, "encrypted_index": BASE64, "data": BASE64,
    "name": NAME, "tool_name": NAME, "namespace": NAME, "server_name": NAME, "mcp_server_name": NAME,
    "server_label": NAME,
    "url": st.just("https://example.com/a"), "image_url": st.just("https://example.com/a.png"),
    "file_url": st.just("https://example.com/a.pdf"), "file_data": st.just("data:application/pdf;base64,JVBERi0="),
    "model": st.just("small-chat"),
}


def from_sdk(tp: Any, key: str = "", depth: int = 0) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return from_sdk(args[0], key, depth)
    if origin in (typing.Required, typing.NotRequired):
        return from_sdk(args[0], key, depth)
    if origin is typing.Union or origin is types.UnionType:
        members = [from_sdk(a, key, depth) for a in args if a is not type(None) and not _file_like(a)]
        drawable = [m for m in members if not m.is_empty]
        return st.one_of(drawable) if drawable else st.nothing()
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence, typing.List):
        element = from_sdk(args[0], key, depth + 1) if depth < MAX_DEPTH else st.nothing()
        if element.is_empty:
            return st.just([])
        return st.lists(element, min_size=1 if key == "messages" else 0, max_size=2)
    if origin in (dict, collections.abc.Mapping, typing.Dict):
        return st.dictionaries(NAME, TEXT, max_size=2)
    if is_typeddict(tp):
        return _typed_dict(tp, depth)
    if tp is str:
        return _BY_KEY.get(key, TEXT)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(0, 40) if key != "budget_tokens" else st.integers(1024, 2048)
    if tp is float:
        return st.floats(0, 1)
    if tp is object:
        return st.dictionaries(NAME, TEXT, max_size=2)
    return st.nothing()


def _file_like(tp: Any) -> bool:
    return tp in (typing.IO[bytes],) or getattr(tp, "__name__", "") in ("PathLike", "IO")


def _required(tp: Any, hint: Any) -> bool:
    """A key is required when annotated ``Required[...]`` (the SDKs write total=False
    TypedDicts so), or in a total TypedDict unless ``NotRequired``."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        origin = typing.get_origin(typing.get_args(hint)[0])
    if origin is typing.Required:
        return True
    return bool(getattr(tp, "__total__", True)) and origin is not typing.NotRequired


def _typed_dict(tp: Any, depth: int) -> st.SearchStrategy[dict[str, Any]]:
    hints = typing.get_type_hints(tp, include_extras=True)
    required = {k for k, v in hints.items() if _required(tp, v)}
    if depth >= MAX_DEPTH and not required <= {"type"}:
        return st.nothing()
    fixed = {k: from_sdk(v, k, depth + 1) for k, v in hints.items() if k in required}
    optional = {k: from_sdk(v, k, depth + 1) for k, v in hints.items() if k not in required}
    return st.fixed_dictionaries(fixed, optional=optional)
