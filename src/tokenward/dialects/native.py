"""Reading a native upstream's answers in each dialect: usage and the deltas that carry text.

When the upstream serves a dialect itself, the gateway forwards the client's request and
reads the answer without translating it. Usage then comes from the dialect's own fields:
Responses' ``usage`` (whole, or in ``response.completed`` / ``response.incomplete``),
Anthropic's ``usage`` (whole, or ``message_start`` then ``message_delta``). Anthropic counts
prompt tokens read from or written to its cache apart from ``input_tokens``; the prompt
here is their sum, as chat's ``prompt_tokens`` is.

``text_delta`` names the events that carry generated text (an answer's text, a tool call's
arguments, thinking and reasoning), with a key per text slot: the stream's usage is counted
from them when the upstream reports none or less, and a streamed editor (the personal-data
restorer, dialects/native_edit.py) keeps one hold-back buffer per slot and writes the
edited text back with ``with_text``. Events that repeat a whole text (``.done``,
``output_item.done``, ``response.completed``) are listed by ``whole_texts``.
"""

from __future__ import annotations

from typing import Any, Iterator

import msgspec

Counts = tuple[int, int]   # (prompt tokens, completion tokens)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def responses_usage(usage: object) -> Counts | None:
    if not isinstance(usage, dict):
        return None
    prompt, completion = _int(usage.get("input_tokens")), _int(usage.get("output_tokens"))
    return (prompt, completion) if prompt is not None and completion is not None else None


def messages_usage(usage: object) -> Counts | None:
    if not isinstance(usage, dict):
        return None
    parts = [_int(usage.get(name)) for name in ("input_tokens", "cache_read_input_tokens",
                                                "cache_creation_input_tokens")]
    completion = _int(usage.get("output_tokens"))
    if parts[0] is None or completion is None:
        return None
    return sum(p or 0 for p in parts), completion


def answer_usage(dialect: str, body: bytes) -> Counts | None:
    """The usage a whole native answer reports (None: absent or unreadable)."""
    try:
        answer = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    if not isinstance(answer, dict):
        return None
    return (responses_usage if dialect == "responses" else messages_usage)(answer.get("usage"))


class Event(msgspec.Struct):
    """What the gateway reads of a native stream's event (its data decoded with the rest
    skipped, escapes and all): its type, the usage it reports (at the top, in
    ``message_start``'s message, in a closing ``response``), its sequence number. A delta's
    own text is not decoded here (``DELTA_KINDS``)."""

    type: Any = None
    usage: Any = None
    message: Any = None
    response: Any = None
    sequence_number: Any = None


_read_event = msgspec.json.Decoder(Event).decode


def read_event(data: bytes) -> Event | None:
    """An event's data as an ``Event``; None when it is not a JSON object."""
    try:
        return _read_event(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


class StreamUsage:
    """Usage read from a native stream's events (``feed`` each ``Event``)."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self._usage: dict[str, Any] = {}
        # the upstream's final count arrived (``response.completed`` with usage, a
        # ``message_delta`` with output tokens): until then what was reported is a floor
        self.final = False

    def feed(self, event: Event) -> None:
        kind = event.type
        if self.dialect == "responses":
            if kind in ("response.completed", "response.incomplete", "response.failed"):
                response = event.response
                if isinstance(response, dict) and isinstance(response.get("usage"), dict):
                    self._usage = response["usage"]
                    self.final = True
        elif kind == "message_start" and isinstance(event.message, dict):
            usage = event.message.get("usage")
            if isinstance(usage, dict):
                self._usage = dict(usage)
        elif kind == "message_delta" and isinstance(event.usage, dict):
            # message_delta's counts are cumulative: they replace message_start's
            self._usage.update({k: v for k, v in event.usage.items() if v is not None})
            self.final = _int(event.usage.get("output_tokens")) is not None

    @property
    def counts(self) -> Counts | None:
        return (responses_usage if self.dialect == "responses" else messages_usage)(self._usage or None)


# Responses events that carry a piece of generated text in ``delta``: (slot kind, is tool input)
_RESPONSES_DELTAS = {
    "response.output_text.delta": ("text", False), "response.refusal.delta": ("text", False),
    "response.function_call_arguments.delta": ("arguments", True),
    "response.custom_tool_call_input.delta": ("arguments", True),
    "response.reasoning_text.delta": ("reasoning", False),
    "response.reasoning_summary_text.delta": ("summary", False),
}
# Anthropic's content_block_delta types: the field holding the text, and whether it is tool input
_MESSAGES_DELTAS = {"text_delta": ("text", False), "input_json_delta": ("partial_json", True),
                    "thinking_delta": ("thinking", False)}


# the events whose data carries a piece of generated text
DELTA_KINDS = frozenset([*_RESPONSES_DELTAS, "content_block_delta"])


def is_delta(event: Event) -> bool:
    """Whether an event is a delta that reports no usage: nothing in it for ``StreamUsage``,
    and its text need not be read unless the stream ends without the upstream's final count."""
    kind = event.type
    return event.usage is None and type(kind) is str and kind in DELTA_KINDS


def text_delta(data: dict[str, Any]) -> tuple[tuple[Any, ...], str, bool] | None:
    """(slot key, text, whether it is a tool's input) of an event that carries a piece of
    generated text (an answer's text, a tool call's arguments, thinking), else None."""
    kind = data.get("type")
    spec = _RESPONSES_DELTAS.get(kind) if isinstance(kind, str) else None
    if spec is not None:
        where = data.get("summary_index", data.get("content_index"))
        return ("responses", data.get("output_index"), spec[0], where), _str(data.get("delta")), spec[1]
    if kind == "content_block_delta" and isinstance(data.get("delta"), dict):
        delta = data["delta"]
        found = _MESSAGES_DELTAS.get(delta.get("type"))
        if found is not None:
            return ("messages", data.get("index")), _str(delta.get(found[0])), found[1]
    return None


def with_text(data: dict[str, Any], text: str) -> dict[str, Any]:
    """The same delta event carrying ``text`` instead (e.g. with placeholders restored)."""
    out = dict(data)
    if "delta" in out and isinstance(out["delta"], dict):
        delta = dict(out["delta"])
        kind = delta.get("type")
        spec = _MESSAGES_DELTAS.get(kind) if isinstance(kind, str) else None
        delta[spec[0] if spec is not None else "text"] = text
        out["delta"] = delta
    else:
        out["delta"] = text
    return out


def whole_texts(data: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """(container, field) of every complete text an event repeats, to restore in place."""
    kind = data.get("type")
    if kind == "response.output_text.done":
        yield data, "text"
    elif kind == "response.function_call_arguments.done":
        yield data, "arguments"
    elif kind in ("response.content_part.done",) and isinstance(data.get("part"), dict):
        yield from _part_texts(data["part"])
    elif kind == "response.output_item.done" and isinstance(data.get("item"), dict):
        yield from _item_texts(data["item"])
    elif kind in ("response.completed", "response.incomplete") and isinstance(data.get("response"), dict):
        for item in data["response"].get("output") or ():
            if isinstance(item, dict):
                yield from _item_texts(item)


def _item_texts(item: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    if item.get("type") == "function_call" and isinstance(item.get("arguments"), str):
        yield item, "arguments"
    for part in item.get("content") or ():
        if isinstance(part, dict):
            yield from _part_texts(part)


def _part_texts(part: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    kind = part.get("type")
    field = {"output_text": "text", "refusal": "refusal"}.get(kind) if isinstance(kind, str) else None
    if field is not None and isinstance(part.get(field), str):
        yield part, field


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""
