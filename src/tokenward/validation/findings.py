"""What validation gathers while it checks one request (``Findings``).

A module of its own so that it is compiled with the hot path (tokenward/compiled.py):
``result.py`` holds a msgspec Struct, which a compiled module may not, and re-exports it.
Compiled, each read and write of a finding is a native slot, not a generic attribute.
"""

from __future__ import annotations

from typing import Any


class Findings:
    """Facts gathered while one request is checked (mutable, private to validation)."""

    __slots__ = ("attachments", "constrained", "extra_raw", "embed_tokens", "clamped", "bound_set", "defaulted")

    def __init__(self) -> None:
        self.attachments: list[Any] = []
        self.constrained = False          # structured output of any kind was asked for
        self.extra_raw: list[bytes] = []  # JSON the template renders into the prompt (vLLM documents)
        self.embed_tokens: list[int] = []  # upper bound of tokens of each prompt_embeds entry
        self.clamped: dict[str, int] = {}  # field -> the value the client asked for
        self.bound_set = 0                 # the output bound the gateway wrote (set or clamped)
        self.defaulted = False             # the bound was missing: the plan's default filled it
