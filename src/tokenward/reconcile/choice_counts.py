"""What each choice of a stream carried so far, counted per chunk (reconcile/stream_usage.py).

A module of its own so that mypyc compiles it (tokenward/compiled.py): it runs for every
relayed event, while ``StreamUsage`` stays Python (its tests subclass it, which a compiled
class refuses). The counting rules are stream_usage.py's docstring.
"""

from __future__ import annotations

from ..wire.chunks import Choice, Delta


class ChoiceCount:
    __slots__ = ("events", "empty", "texts", "finish")

    def __init__(self) -> None:
        self.events = 0
        self.empty = 0
        self.texts: list[str] = []
        self.finish: str | None = None


def delta_text(delta: Delta) -> tuple[bool, str]:
    """(carries output, its text) of a chat delta."""
    parts = []
    carries = False
    for value in (delta.content, delta.reasoning_content, delta.refusal):
        if value is not None:
            carries = True
            if value:
                parts.append(value)
    if delta.tool_calls:
        carries = True
        for call in delta.tool_calls:
            fn = call.function
            if fn is not None:
                if fn.name:
                    parts.append(fn.name)
                if fn.arguments:
                    parts.append(fn.arguments)
    if carries and delta.role is not None and not parts:
        return False, ""  # the role chunk ({"role": "assistant", "content": ""})
    return carries, "".join(parts)


def count_choices(counts: dict[int, ChoiceCount], choices: list[Choice], count_text: bool) -> bool:
    """Account for one chunk's choices in ``counts``; whether any carried output (a token
    event). ``count_text``: keep the texts, for a tokenizer to count at the end."""
    tokens = False
    for choice in choices:
        count = counts.get(choice.index)
        if count is None:
            count = counts[choice.index] = ChoiceCount()
        if choice.delta is not None:
            carries, text = delta_text(choice.delta)
        elif choice.text is not None:
            carries, text = True, choice.text
        else:
            carries, text = False, ""
        if choice.finish_reason is not None:
            count.finish = choice.finish_reason
            if not text:
                carries = False  # a finish chunk, not a token
        if carries:
            tokens = True
            count.events += 1
            if text:
                if count_text:
                    count.texts.append(text)
            else:
                count.empty += 1
    return tokens
