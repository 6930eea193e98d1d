"""What a streamed answer used, read from its events as they pass (sans-IO).

A backend that reports usage in the stream (OpenAI, vLLM: the gateway asks for it) is
taken at its word: the last reported usage wins, a cumulative count overriding rather
than adding. A backend that reports none (llama.cpp's servers ignore
``stream_options.include_usage``) is counted:

- one *token event* per choice chunk that carries output (``delta.content``,
  ``reasoning_content``, ``refusal``, tool-call arguments, or a completion's ``text``),
  **empty or not**: a server sends one chunk per token, and a token that is only part of
  a character, or a special token, arrives with empty text. The role chunk and a finish
  chunk with no text are not tokens;
- where the model has a tokenizer, the delivered text of each choice is tokenized at the
  end, plus one token per empty event (their tokens left no text): a server that merges
  several tokens into one chunk (held-back bytes of a character) is counted right too.
  The larger of the two counts is taken, per choice.

It also tells how the stream ended: which choices got a ``finish_reason``, whether the
backend sent ``[DONE]``, whether any choice chunk came at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from ..wire.chunks import parsed
from .choice_counts import ChoiceCount, count_choices
from ..wire.sse import SseEvent
from .usage import Usage
from .usage_bounds import from_reported
from ..wire.codec import json_decode as _decode_any

if TYPE_CHECKING:
    from ..tokenize.counters import Counter


# what one event was, for the relay (MALFORMED: broken framing, or data that is not a JSON
# object: the relay ends the stream there and passes none of its bytes)
OTHER, TOKENS, USAGE_ONLY, DONE, ERROR, MALFORMED = range(6)


class StreamUsage:
    """Feed every event with ``observe``; read ``usage(prompt_tokens)`` at any point."""

    __slots__ = ("reported", "saw_done", "unreadable", "_choices", "_count_text", "_counter",
                 "stream_id", "object", "created", "model")

    def __init__(self, counter: Counter | None = None) -> None:
        # counter: the model's tokenizer (``tokenize.counters.Counter``) when it has a real
        # one; None counts token events only.
        self._counter = counter
        self._count_text = counter is not None
        self.reported: Usage | None = None
        self.saw_done = False
        self.unreadable = 0          # data events that were not a chunk we could read
        self._choices: dict[int, ChoiceCount] = {}
        # the stream's own id and shape, for a usage chunk the gateway adds
        self.stream_id: str | None = None
        self.object: str | None = None
        self.created: int | None = None
        self.model: str | None = None

    def observe(self, event: SseEvent) -> int:
        """Account for one event; return what it was (TOKENS, USAGE_ONLY, DONE, ...)."""
        data = event.data
        if event.malformed:
            return MALFORMED
        if data is None:
            return OTHER
        if data == b"[DONE]":
            self.saw_done = True
            return DONE
        chunk = parsed(event)
        if chunk is None:
            return self._observe_loosely(data)
        kind = OTHER
        if self.stream_id is None and chunk.id is not None:
            self.stream_id, self.object, self.created, self.model = chunk.id, chunk.kind, chunk.created, chunk.model
        if chunk.usage is not None:
            usage = from_reported(chunk.usage)
            if usage.known:
                self.reported = usage
                if not chunk.choices:
                    return USAGE_ONLY
        if chunk.error is not None and not chunk.choices:
            return ERROR
        if chunk.choices and count_choices(self._choices, chunk.choices, self._count_text):
            kind = TOKENS
        return kind

    def _observe_loosely(self, data: bytes) -> int:
        """An event whose fields have unexpected types: keep its usage, count it as a token
        if it has choices, and note it (the record says how many). Data that is not a JSON
        object is MALFORMED."""
        try:
            obj = _decode_any(data)
        except msgspec.DecodeError:
            return MALFORMED
        if not isinstance(obj, dict):
            return MALFORMED
        self.unreadable += 1
        usage = from_reported(obj.get("usage"))
        if usage.known:
            self.reported = usage
        choices = obj.get("choices")
        if isinstance(choices, list) and choices:
            count = self._choices.setdefault(0, ChoiceCount())
            count.events += 1
            count.empty += 1
            return TOKENS
        return USAGE_ONLY if usage.known else OTHER

    @property
    def any_choice(self) -> bool:
        """Did any choice chunk arrive (a role chunk counts)?"""
        return bool(self._choices)

    @property
    def token_events(self) -> int:
        return sum(c.events for c in self._choices.values())

    def unfinished(self) -> list[int]:
        """Indices of the choices seen without a ``finish_reason``."""
        return [i for i, c in self._choices.items() if c.finish is None]

    def counted_output(self) -> int:
        total = 0
        counter = self._counter
        for choice in self._choices.values():
            tokens = choice.events
            if counter is not None and choice.texts:
                by_text = counter.count_uncached("".join(choice.texts)) + choice.empty
                if by_text > tokens:
                    tokens = by_text
            total += tokens
        return total

    def usage(self, prompt_tokens: int | None) -> Usage:
        """The backend's reported usage if it sent one, else the gateway's count."""
        if self.reported is not None:
            return self.reported
        return Usage(prompt_tokens, self.counted_output(), "counted")
