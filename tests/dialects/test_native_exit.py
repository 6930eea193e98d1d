"""The end of a native stream (stages/s05_dialect.py DialectAnswer.close): the gateway's own
in-band error, written in chat's shape by the relay, becomes the dialect's ``error`` event;
nothing else of chat's ending (``[DONE]``, a usage chunk) is written into a native stream."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tokenward.errors import Reason, Refusal
from tokenward.http.responses import sse_error_event
from tokenward.stages.s05_dialect import DialectAnswer, DialectRoute
from tokenward.wire.sse import SseEvent, SseSplitter

ROUTE = SimpleNamespace(path="/v1/responses", methods=frozenset({"POST"}), content_types=frozenset(),
                        max_body_bytes=1, allow_header=(), has_body=True)


def answer(dialect: str) -> DialectAnswer:
    route = DialectRoute(ROUTE, dialect, True, b"{}", b"{}")
    route.forwarded_native = True
    ctx = SimpleNamespace(usage=None, work=None)
    return DialectAnswer(ctx, route, None, None)   # type: ignore[arg-type]


def events(raw: bytes) -> list[dict]:
    return [json.loads(e.data) for e in SseSplitter().feed(raw)]


def test_a_cut_native_responses_stream_ends_with_its_error_event():
    out = answer("responses")
    seen = [SseEvent(b'event: response.created\ndata: {"type":"response.created","sequence_number":0}\n\n'),
            SseEvent(b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
                     b'"sequence_number":1,"delta":"hi"}\n\n')]
    assert out.events(seen) == seen                  # passed as the upstream wrote them
    tail = out.close(sse_error_event(Refusal(Reason.upstream_truncated, "cut (request req_1)")))
    assert events(tail) == [{"type": "error", "sequence_number": 2, "code": "upstream_truncated",
                             "message": "cut (request req_1)", "param": None}]
    assert tail.startswith(b"event: error\n")


def test_a_cut_native_messages_stream_ends_with_anthropics_error_event():
    tail = answer("messages").close(sse_error_event(Refusal(Reason.stream_idle_timeout, "idle (request req_1)")))
    assert events(tail) == [{"type": "error", "error": {"type": "timeout_error", "message": "idle (request req_1)",
                                                        "code": "stream_idle_timeout"}}]


def test_chats_own_ending_is_not_written_into_a_native_stream():
    assert answer("messages").close(b"data: [DONE]\n\n") == b""
