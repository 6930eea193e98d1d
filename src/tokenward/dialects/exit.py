"""The way out of a dialect request: its answer, its refusals and its headers in its API's terms.

The pipeline works on the chat-completions view of a Responses or Messages request, so
what leaves it is chat: a completion, chunks, OpenAI's error envelope, OpenAI's
``x-ratelimit-*`` headers. Two pieces turn that into the client's API:

- ``TranslatedAnswer``, the dialect stage's response transform (pipeline/outbound.py):
  a whole completion becomes a ``response`` / ``message`` object, a stream's chunks
  become the dialect's typed events (``ResponsesStream`` / ``MessagesStream``), and the
  stream's end (``close``: the usage chunk and ``[DONE]``, or the in-band error) its
  closing events. It is registered first, so it runs last: the personal-data restorer
  and the cache capture see chat, as on ``/v1/chat/completions``.
- ``DialectSend``, which wraps the request's ASGI ``send`` from the dialect stage on:
  every response head gets the API's rate-limit headers (Anthropic's
  ``anthropic-ratelimit-*`` on ``/v1/messages``), every refusal ``x-should-retry: false``
  when retrying cannot help (a 4xx other than 408 and 429), and on ``/v1/messages`` a
  refusal's body becomes Anthropic's envelope. ``x-tokenward-reason`` is kept as it is.
"""

from __future__ import annotations

from typing import Any, Callable, Union

import msgspec

from ..errors import Reason
from ..http.asgi import Send
from ..wire.sse import DONE_DATA, SseEvent, SseSplitter
from . import messages_schema, messages_translate, responses_schema, responses_translate
from .common import encode
from .envelopes import messages_error_body
from .messages_stream import MessagesStream
from .parsed import Parsed
from .ratelimit import anthropic_from_openai
from .responses_stream import ResponsesStream

Clock = Callable[[], float]
# the official SDKs do not retry an answer that carries it (http/responses.py NO_RETRY)
NO_RETRY = (b"x-should-retry", b"false")


class _Peek(msgspec.Struct):
    choices: object = None
    error: object = None
    usage: object = None


class _Error(msgspec.Struct):
    message: str = ""
    code: Union[str, None] = None
    param: Union[str, None] = None


class _Envelope(msgspec.Struct):
    error: Union[_Error, None] = None


_peek = msgspec.json.Decoder(_Peek).decode
_envelope = msgspec.json.Decoder(_Envelope).decode


def _usage_of(body: bytes) -> object:
    try:
        return _peek(body).usage
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


def _status_of(code: str | None, default: int = 500) -> int:
    member = Reason.__members__.get(code or "")
    return member.status if member is not None else default


def _error_of(data: bytes) -> _Error | None:
    try:
        return _envelope(data).error
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


Counts = tuple[int, int]


def _none() -> None:
    return None


def charged_usage(own: object, charged: Counts) -> dict[str, Any]:
    """The chat usage the client reads: the counts the request was charged (prompt,
    completion), with the backend's details (cached prompt tokens) where it gave them."""
    usage = dict(own) if isinstance(own, dict) else {}
    usage["prompt_tokens"], usage["completion_tokens"] = charged
    usage["total_tokens"] = charged[0] + charged[1]
    return usage


class TranslatedAnswer:
    """The chat answer back into the dialect, whole or streamed (one per request). Its usage
    is what the request was charged (``charged``, read at the end), and a Responses object
    echoes the output bound the gateway used (``bound``), as the clients read them."""

    __slots__ = ("dialect", "parsed", "input_tokens", "clock", "charged", "bound", "_stream")

    def __init__(self, dialect: str, parsed: Parsed, input_tokens: Callable[[], int], clock: Clock,
                 charged: Callable[[], Counts | None] = _none, bound: Callable[[], int | None] = _none) -> None:
        self.dialect = dialect
        self.parsed = parsed
        self.input_tokens = input_tokens     # the work stage's prompt count, read when the stream starts
        self.clock = clock
        self.charged = charged
        self.bound = bound
        self._stream: ResponsesStream | MessagesStream | None = None

    # -- whole answers --------------------------------------------------------------
    def whole(self, body: bytes) -> bytes:
        try:
            peek = _peek(body)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return body
        if peek.choices is None:
            return body     # an error envelope: DialectSend writes it in the API's shape
        charged = self.charged()
        usage = charged_usage(_usage_of(body), charged) if charged is not None else None
        if self.dialect == "responses":
            assert isinstance(self.parsed, responses_schema.Parsed)
            return encode(responses_translate.response_from_chat(body, self.parsed, max_output_tokens=self.bound(),
                                                                 usage=usage))
        assert isinstance(self.parsed, messages_schema.Parsed)
        return encode(messages_translate.message_from_chat(body, self.parsed, usage=usage))

    # -- streams --------------------------------------------------------------------
    def _translator(self) -> ResponsesStream | MessagesStream:
        stream = self._stream
        if stream is None:
            if isinstance(self.parsed, responses_schema.Parsed):
                stream = ResponsesStream(self.parsed, created_at=int(self.clock()), max_output_tokens=self.bound())
            else:
                stream = MessagesStream(self.parsed, input_tokens=self.input_tokens())
            self._stream = stream
        return stream

    def events(self, events: list[SseEvent]) -> list[SseEvent]:
        stream = self._stream or self._translator()
        out = []
        for event in events:
            data = event.data
            if not data or data == DONE_DATA:
                continue
            parsed = event.parsed
            out.append(stream.feed(parsed if parsed is not None else data))
        raw = out[0] if len(out) == 1 else b"".join(out)
        # events this transform wrote: only their bytes are read after it (it runs last), so
        # they are not parsed again
        return [SseEvent(raw, read=False)] if raw else []

    def finish(self) -> list[SseEvent]:
        return []   # nothing held back; the end is written by ``close``

    def close(self, tail: bytes) -> bytes:
        """The stream's last bytes (a usage chunk and ``[DONE]``, or an error event) as the
        dialect's closing events: ``response.completed`` / ``message_stop``, or ``error``."""
        stream = self._translator()
        out: list[bytes] = []
        for event in SseSplitter().feed(tail):
            data = event.data
            if not data or event.done:
                continue
            error = _error_of(data)
            if error is not None:
                code = error.code or "upstream_error"
                if isinstance(stream, MessagesStream):
                    return b"".join(out) + stream.error(code, error.message, _status_of(code))
                return b"".join(out) + stream.error(code, error.message)
            out.append(stream.feed(data))
        charged = self.charged()
        return b"".join(out) + stream.finish(charged_usage(stream.usage, charged) if charged is not None else None)


class DialectSend:
    """The request's ASGI ``send`` with the dialect's headers and refusal envelope.

    A response head is held until its first body message, so a whole answer leaves in one
    call of the server's ``respond_now`` (its fast path, when the wrapped ``send`` is the
    gateway's own server's) and a refusal's body can be rewritten with its length."""

    __slots__ = ("_send", "dialect", "_clock", "_held", "_respond_now")

    def __init__(self, send: Send, dialect: str, clock: Clock) -> None:
        self._send = send
        self.dialect = dialect
        self._clock = clock
        self._held: dict[str, Any] | None = None
        self._respond_now = getattr(getattr(send, "__self__", None), "respond_now", None)

    def _headers(self, status: int, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        if self.dialect == "messages":
            headers = anthropic_from_openai(headers, self._clock())
            for name, value in headers:
                if name == b"x-request-id":   # Anthropic's SDK reads its own name (``_request_id``)
                    headers.append((b"request-id", value))
                    break
        if 400 <= status < 500 and status not in (408, 429) and NO_RETRY not in headers:
            headers.append(NO_RETRY)
        return headers

    async def __call__(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            status = message["status"]
            self._held = {**message, "headers": self._headers(status, list(message.get("headers") or ()))}
            return
        start = self._held
        if kind == "http.response.body" and start is not None:
            self._held = None
            status, headers = start["status"], start["headers"]
            body = message.get("body", b"")
            whole = not message.get("more_body", False)
            if whole and status >= 400 and self.dialect == "messages":
                body = self._anthropic(status, body, dict(headers).get(b"x-request-id"))
                headers = [(k, v) for k, v in headers if k != b"content-length"]
                headers.append((b"content-length", b"%d" % len(body)))
                start["headers"] = headers
                message = {**message, "body": body}
            respond_now = self._respond_now
            if whole and respond_now is not None and respond_now(status, headers, body):
                return
            await self._send(start)
        await self._send(message)

    @staticmethod
    def _anthropic(status: int, body: bytes, request_id: bytes | None) -> bytes:
        error = _error_of(body)
        if error is None:
            return body
        return messages_error_body(error.code or "upstream_error", status, error.message,
                                   request_id.decode("latin-1") if request_id else None, error.param)
