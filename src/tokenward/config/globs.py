"""Glob patterns of the config: model aliases (``models.NAME.aliases``) and tool names
(``plans.NAME.allow_tools``).

The language is deliberately small: ``*`` matches any run of characters (none included),
``?`` exactly one, every other character only itself, case included. There are no
character classes, braces or escapes: ``[``, ``]``, ``{``, ``}`` and ``\\`` are refused
at start-up rather than read as literals a reader might take for syntax, as are
whitespace, control characters and an empty pattern.

Two patterns *overlap* when one name matches both. That is decided exactly, by the
emptiness of the product of the two patterns' automata (``overlap``): a pattern is a
chain of states, one per character, where ``*`` is a state with a loop on any character;
the product walks both chains at once and the patterns overlap when it can reach both
ends together, and the path it took spells a name both match (the error shows it). It
is quadratic in the patterns' lengths (at most 256 each), and needs no sampling: no
false alarm, no missed overlap (tests/config/test_globs.py checks both against brute force).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from functools import lru_cache

MAX_PATTERN = 256
STAR, ONE = "*", "?"
_FORBIDDEN = frozenset("[]{}\\")


def pattern_error(pattern: object) -> str | None:
    """Why ``pattern`` is not a glob this config accepts, or None when it is one."""
    if not isinstance(pattern, str):
        return "expected a string"
    if not pattern:
        return "an empty pattern matches nothing"
    if len(pattern) > MAX_PATTERN:
        return f"a pattern is at most {MAX_PATTERN} characters"
    for ch in pattern:
        if ch in _FORBIDDEN:
            return (f"{ch!r} is not supported in a pattern (only * and ? are wildcards: no classes, braces or "
                    f"escapes)")
        if not ch.isprintable() or ch.isspace():
            return f"{ch!r} (whitespace or a control character) is not allowed in a pattern"
    return None


def is_literal(pattern: str) -> bool:
    return STAR not in pattern and ONE not in pattern


def to_regex(pattern: str) -> str:
    """The pattern as a regular expression (for ``re.fullmatch`` with ``re.DOTALL``)."""
    return "".join(".*" if ch == STAR else "." if ch == ONE else re.escape(ch) for ch in pattern)


def overlap(first: str, second: str) -> str | None:
    """A name both patterns match, or None when there is none (exact: a search of the
    product automaton, whose path to both ends spells the name)."""
    a, b = first, second
    end = (len(a), len(b))
    came: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {(0, 0): None}
    todo = deque([(0, 0)])   # breadth first: a short name to show
    while todo:
        state = todo.popleft()
        if state == end:
            return _spell(came, end)
        for step, char in _moves(a, b, *state):
            if step not in came:
                came[step] = (state, char)
                todo.append(step)
    return None


def _spell(came: dict[tuple[int, int], tuple[tuple[int, int], str] | None], end: tuple[int, int]) -> str:
    chars = []
    link = came[end]
    while link is not None:
        state, char = link
        chars.append(char)
        link = came[state]
    return "".join(reversed(chars))


def _moves(a: str, b: str, i: int, j: int) -> Iterable[tuple[tuple[int, int], str]]:
    """The product's moves from (i, j), each with the character it reads ("" for none): a
    star may be left (it matched its last character), or both patterns read one character
    each of them accepts (a star by its loop, staying where it is)."""
    x = a[i] if i < len(a) else None
    y = b[j] if j < len(b) else None
    if x == STAR:
        yield (i + 1, j), ""
    if y == STAR:
        yield (i, j + 1), ""
    if x is None or y is None:
        return
    if x == STAR and y != STAR:
        yield (i, j + 1), _char(y)
    elif y == STAR and x != STAR:
        yield (i + 1, j), _char(x)
    elif x != STAR and (x == y or x == ONE or y == ONE):
        yield (i + 1, j + 1), _char(y if x == ONE else x)


def _char(symbol: str) -> str:
    return "x" if symbol == ONE else symbol


class GlobSet:
    """Names against a set of patterns: exact names by one set lookup, the rest by one
    compiled alternation (``re.fullmatch``)."""

    __slots__ = ("exact", "_any")

    def __init__(self, patterns: Iterable[str]) -> None:
        listed = tuple(patterns)
        self.exact = frozenset(p for p in listed if is_literal(p))
        wild = [p for p in listed if not is_literal(p)]
        self._any = re.compile("|".join(f"(?:{to_regex(p)})" for p in wild), re.DOTALL) if wild else None

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name in self.exact:
            return True
        return self._any is not None and self._any.fullmatch(name) is not None

    def __bool__(self) -> bool:
        return bool(self.exact) or self._any is not None


def matches(pattern: str, name: str) -> bool:
    return re.fullmatch(to_regex(pattern), name, re.DOTALL) is not None


@lru_cache(maxsize=1024)
def glob_set(patterns: tuple[str, ...]) -> GlobSet:
    """One compiled ``GlobSet`` per distinct pattern list (a plan's ``allow_tools``): built
    once, shared by every stage that asks (entitlement here; the dialect stage for the
    ``NAMESPACE.TOOL`` names of a Responses ``namespace`` tool)."""
    return GlobSet(patterns)
