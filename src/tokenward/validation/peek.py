"""The stages' lenient peek of a chat body, read off the strict decode validation makes anyway.

The stages before validation (identity's ``user``, entitlement, control, admission's bound)
read the body through ``RequestBody.peek()``, a lenient msgspec decode; validation then
decodes the same bytes strictly. Each decode scans the whole body: for an agent's 64 KiB
message the peek alone was ~318K instructions a request (callgrind, bench/agents_inproc.py
--workload new64k; docs/benchmarks.md, "Side by side with TensorZero"), a pass over text the
peek throws away. So on the chat route, when validation runs, the edge hands the body
``STRICT_CHAT``: the first peek decodes the body strictly (the typed view validation reads,
kept for it), and ``chat_peek`` builds from it the very ``PeekFields`` the lenient decode
would give. It does so only where that is plain to see: every field is a JSON scalar, a list
of messages (their roles), plain function tools, a ``tool_choice`` string, a response
format's ``type`` or ``stream_options``; a body with a named tool choice or any vLLM field
set, or one the strict schema refuses, is peeked leniently as before (validation then
refuses it with the precise error). tests/validation/test_strict_peek.py holds the two to
the same value on generated bodies.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET

from ..wire.peek_fields import VLLM_FIELDS, BodyPeek, PeekFields, PeekMessage, _Name, _ResponseFormat, _Tool
from ..wire.request_body import StrictPeek
from .request import CHAT_DECODER
from .schemas import ChatCompletionRequest, StreamOptions

_to_builtins = msgspec.to_builtins
# the chat schema's vLLM fields: any of them set and the body is peeked leniently
_VLLM_CHAT: Final = tuple(name for name in VLLM_FIELDS if name in ChatCompletionRequest.__struct_fields__)


def _scalar(value: object) -> object:
    return None if value is UNSET else value


def chat_peek(req: Any) -> PeekFields | None:
    """``req`` (a strictly decoded ``ChatCompletionRequest``) as the lenient peek of the same
    bytes, or None where this does not say exactly (then the caller peeks leniently)."""
    for name in _VLLM_CHAT:
        if getattr(req, name) is not UNSET:
            return None
    choice = req.tool_choice
    if choice is not UNSET and choice is not None and type(choice) is not str:
        return None
    tools = req.tools
    if tools is UNSET or tools is None:
        peek_tools = None
    else:
        peek_tools = [_Tool(type=tool.type, function=_Name(name=tool.function.name)) for tool in tools]
    fmt = req.response_format
    options = req.stream_options
    return BodyPeek(
        model=req.model,
        user=_scalar(req.user),
        messages=[PeekMessage(role=message.__struct_config__.tag) for message in req.messages],
        tools=peek_tools,
        tool_choice=_scalar(choice),
        response_format=(None if fmt is UNSET or fmt is None else _ResponseFormat(type=fmt.__struct_config__.tag)),
        logprobs=_scalar(req.logprobs),
        top_logprobs=_scalar(req.top_logprobs),
        stream=_scalar(req.stream),
        stream_options=(_to_builtins(options) if type(options) is StreamOptions else None),
        max_tokens=_scalar(req.max_tokens),
        max_completion_tokens=_scalar(req.max_completion_tokens),
        n=_scalar(req.n),
    )


STRICT_CHAT: Final = StrictPeek(CHAT_DECODER, chat_peek)
