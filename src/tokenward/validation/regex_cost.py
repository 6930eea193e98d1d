"""Which regular expressions the gateway can show are cheap to compile (``cheap``).

Backends compile a schema's ``pattern`` or a guided regex into an automaton with no time
limit: outlines-core builds the whole DFA and then indexes it against the vocabulary,
xgrammar and llguidance build theirs as they go. A DFA can be exponentially larger than
its regex (``(a|b)*a(a|b){20}`` has over a million states), and what a backend spends is
about its states times the vocabulary. A regex is cheap here when the gateway has built
its DFA itself, within a small budget, and found it small:

- it is at most ``MAX_LENGTH`` characters, in the plain subset of the ECMAScript syntax
  JSON Schema uses: literals and escapes, ``.``, classes (``[a-z0-9-]``, ``[^"]``, ``\\d``,
  ``\\s`` and their negations; not ``\\w``, below), groups ``( )`` and ``(?: )``, ``|``, greedy ``*``
  ``+`` ``?`` ``{m}`` ``{m,}`` ``{m,n}``, and ``^`` / ``$`` at its two ends only;
- no backreference, lookaround, word boundary, Unicode property, lazy or possessive
  quantifier, or inline flag (each outside the subset: not cheap, whatever it costs);
- every counted repetition's bounds are at most ``MAX_REPEAT``, and no quantifier is
  applied to anything that holds another quantifier;
- its Glushkov automaton (one state per character position, counted repetitions
  expanded) has at most ``MAX_POSITIONS`` states, and the subset construction over it
  reaches at most ``MAX_STATES`` DFA states (the search stops as soon as it would pass
  that, so the gateway's own cost is bounded too).

``unanchored=True`` (a JSON Schema ``pattern``, which matches anywhere in the string)
analyses the regex with ``.*`` on each side that has no anchor: a backend may compile it
so, and that is where ``a[ab]{12}`` turns exponential. tests/validation/test_regex_cost.py
compiles generated members with outlines-core under a time bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

MAX_LENGTH = 256
MAX_REPEAT = 32
MAX_POSITIONS = 256
MAX_STATES = 64
# range boundaries the construction may sweep in all: bounds the gateway's own time (a few ms)
MAX_WORK = 50_000
TOP = 0x10FFFF

Ranges = tuple[tuple[int, int], ...]
# a syntax tree node: ("chars", ranges) | ("cat", [nodes]) | ("alt", [nodes]) | ("rep", node, low, high or None)
Node = tuple[Any, ...]
ANY: Ranges = ((0, TOP),)
_NOT_NEWLINE: Ranges = ((0, 9), (11, TOP))
_DIGIT: Ranges = ((48, 57),)
_SPACE: Ranges = ((9, 13), (32, 32), (160, 160), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
                  (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF))
_CONTROL = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11, "0": 0}
_SPECIAL = set("^$\\.*+?()[]{}|/-")


class NotCheap(ValueError):
    """Outside the class (the message says why); the regex then needs ``guided_regex``."""


def _merged(ranges: list[tuple[int, int]] | Ranges) -> Ranges:
    """Sorted, with overlapping and touching ranges joined: ``[\\s\\S]`` is one range."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _complement(ranges: Ranges) -> Ranges:
    out, low = [], 0
    for lo, hi in sorted(ranges):
        if lo > low:
            out.append((low, lo - 1))
        low = max(low, hi + 1)
    if low <= TOP:
        out.append((low, TOP))
    return tuple(out)


_CLASSES = {"d": _DIGIT, "s": _SPACE}
_CLASSES.update({k.upper(): _complement(v) for k, v in list(_CLASSES.items())})
# ``\w`` is ASCII in ECMAScript but Unicode's ~770 ranges of word characters in the Rust
# and Python engines backends compile with: a costly automaton (outlines-core spends a
# second on ``\w{32}``), so it is left out; ``[A-Za-z0-9_]`` says the same cheaply.


# -- the parser ----------------------------------------------------------------------

@dataclass
class _Parser:
    text: str
    at: int = 0

    def peek(self) -> str | None:
        return self.text[self.at] if self.at < len(self.text) else None

    def take(self) -> str:
        ch = self.text[self.at]
        self.at += 1
        return ch

    def alternation(self) -> Node:
        branches = [self.concatenation()]
        while self.peek() == "|":
            self.take()
            branches.append(self.concatenation())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def concatenation(self) -> Node:
        items: list[Node] = []
        while self.peek() not in (None, "|", ")"):
            items.append(self.quantified(self.atom()))
        return ("cat", items)

    def quantified(self, node: Node) -> Node:
        bounds = self.quantifier()
        if bounds is None:
            return node
        if _has_rep(node):
            raise NotCheap("a quantifier applied to a quantified expression")
        if self.peek() in ("?", "+"):
            raise NotCheap("a lazy or possessive quantifier")
        if self.peek() in ("*", "+", "?", "{") and self.quantifier_ahead():
            raise NotCheap("a quantifier applied to a quantified expression")
        return ("rep", node, *bounds)

    def quantifier_ahead(self) -> bool:
        ch = self.peek()
        return ch in ("*", "+", "?") or (ch == "{" and _counted(self.text, self.at) is not None)

    def quantifier(self) -> tuple[int, int | None] | None:
        ch = self.peek()
        if ch in ("*", "+", "?"):
            self.take()
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
        if ch != "{":
            return None
        counted = _counted(self.text, self.at)
        if counted is None:
            return None    # a literal brace, as ECMAScript reads one that is not a quantifier
        low, high, self.at = counted
        if low > MAX_REPEAT or (high is not None and high > MAX_REPEAT):
            raise NotCheap(f"a counted repetition above {MAX_REPEAT}")
        if high is not None and high < low:
            raise NotCheap("a counted repetition whose bounds are out of order")
        return low, high

    def atom(self) -> Node:
        ch = self.take()
        if ch == "(":
            return self.group()
        if ch == "[":
            return ("chars", self.char_class())
        if ch == "\\":
            return ("chars", self.escape(in_class=False))
        if ch == ".":
            return ("chars", _NOT_NEWLINE)
        if ch in "^$":
            raise NotCheap("an anchor inside the expression")
        if ch in "*+?":
            raise NotCheap("a quantifier with nothing to repeat")
        return ("chars", ((ord(ch), ord(ch)),))

    def group(self) -> Node:
        if self.text.startswith("?:", self.at):
            self.at += 2
        elif self.peek() == "?":
            raise NotCheap("a lookaround, named group or inline flag")
        inner = self.alternation()
        if self.peek() != ")":
            raise NotCheap("an unbalanced parenthesis")
        self.take()
        return inner

    def escape(self, in_class: bool) -> Ranges:
        if self.peek() is None:
            raise NotCheap("a trailing backslash")
        ch = self.take()
        if ch in _CLASSES:
            return _CLASSES[ch]
        if ch in _CONTROL and not (ch == "0" and (self.peek() or "").isdigit()):
            return ((_CONTROL[ch], _CONTROL[ch]),)
        if ch in "xu":
            size = 2 if ch == "x" else 4
            digits = self.text[self.at:self.at + size]
            if len(digits) == size and all(c in "0123456789abcdefABCDEF" for c in digits):
                self.at += size
                return ((int(digits, 16), int(digits, 16)),)
            raise NotCheap(f"an incomplete \\{ch} escape")
        if ch in _SPECIAL:
            return ((ord(ch), ord(ch)),)
        if in_class and ch == "b":
            return ((8, 8),)
        if ch in "wW":
            raise NotCheap(f"\\{ch} (Unicode's word characters to a backend's engine: write [A-Za-z0-9_])")
        raise NotCheap(f"the escape \\{ch} (a backreference, boundary or property)")

    def char_class(self) -> Ranges:
        negated = self.peek() == "^"
        if negated:
            self.take()
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            ch = self.peek()
            if ch is None:
                raise NotCheap("an unclosed character class")
            if ch == "]" and not first:
                self.take()
                break
            first = False
            low = self.class_item()
            if self.peek() == "-" and self.text[self.at + 1:self.at + 2] not in ("]", ""):
                self.take()
                high = self.class_item()
                if len(low) != 1 or len(high) != 1 or low[0][0] != low[0][1] or high[0][0] < low[0][0]:
                    raise NotCheap("a character range that is not a range")
                ranges.append((low[0][0], high[0][1]))
            else:
                ranges.extend(low)
        merged = _merged(ranges)
        return _complement(merged) if negated else merged

    def class_item(self) -> Ranges:
        ch = self.take()
        if ch == "\\":
            return self.escape(in_class=True)
        if ch == "[" and self.peek() == ":":
            raise NotCheap("a POSIX class")
        return ((ord(ch), ord(ch)),)


def _counted(text: str, at: int) -> tuple[int, int | None, int] | None:
    """``{m}``, ``{m,}`` or ``{m,n}`` at ``at``: (m, n or None, the index after it)."""
    end = text.find("}", at)
    if end < 0:
        return None
    body = text[at + 1:end]
    low, comma, high = body.partition(",")
    if not low.isdigit() or (high and not high.isdigit()) or len(body) > 8:
        return None
    return int(low), (int(high) if high else None) if comma else int(low), end + 1


def _has_rep(node: Node) -> bool:
    kind = node[0]
    if kind == "rep":
        return True
    if kind in ("cat", "alt"):
        return any(_has_rep(child) for child in node[1])
    return False


# -- Glushkov positions, then the subset construction under a budget --------------------

Part = tuple[bool, set[int], set[int]]   # (nullable, first positions, last positions)


@dataclass
class _Automaton:
    chars: list[Ranges] = field(default_factory=list)       # what each position reads
    follow: list[set[int]] = field(default_factory=list)    # the positions that may come next

    def position(self, ranges: Ranges) -> Part:
        if len(self.chars) >= MAX_POSITIONS:
            raise NotCheap(f"more than {MAX_POSITIONS} positions once repetitions are counted out")
        self.chars.append(ranges)
        self.follow.append(set())
        here = len(self.chars) - 1
        return False, {here}, {here}

    def then(self, left: Part, right: Part) -> Part:
        """``left`` followed by ``right``."""
        for q in left[2]:
            self.follow[q] |= right[1]
        first = left[1] | right[1] if left[0] else left[1]
        last = left[2] | right[2] if right[0] else right[2]
        return left[0] and right[0], first, last


_EMPTY: Part = (True, set(), set())


def _build(node: Node, auto: _Automaton) -> Part:
    kind = node[0]
    if kind == "chars":
        return auto.position(node[1])
    if kind == "alt":
        parts = [_build(child, auto) for child in node[1]]
        return (any(p[0] for p in parts), set().union(*(p[1] for p in parts)), set().union(*(p[2] for p in parts)))
    if kind == "cat":
        whole = _EMPTY
        for child in node[1]:
            whole = auto.then(whole, _build(child, auto))
        return whole
    _, child, low, high = node
    whole = _EMPTY
    for _ in range(low):                         # the copies that must be there
        whole = auto.then(whole, _build(child, auto))
    if high is None:                             # then one copy that loops on itself
        _, first, last = _build(child, auto)
        for q in last:
            auto.follow[q] |= first
        return auto.then(whole, (True, first, last))
    for _ in range(high - low):                  # then the optional ones
        _, first, last = _build(child, auto)
        whole = auto.then(whole, (True, first, last))
    return whole


def _segments(candidates: set[int], chars: list[Ranges], budget: list[int]) -> set[frozenset[int]]:
    """The distinct sets of candidates that one character can lead to (a sweep over the
    candidates' ranges: each stretch of characters between two boundaries is one symbol)."""
    edges: list[tuple[int, int, int]] = []
    for q in candidates:
        for lo, hi in chars[q]:
            edges.append((lo, 1, q))
            edges.append((hi + 1, -1, q))
    budget[0] -= len(edges)
    if budget[0] < 0:
        raise NotCheap("its automaton is too costly to build")
    edges.sort()
    out: set[frozenset[int]] = set()
    active: dict[int, int] = {}
    i = 0
    while i < len(edges):
        point = edges[i][0]
        while i < len(edges) and edges[i][0] == point:
            _, step, q = edges[i]
            active[q] = active.get(q, 0) + step
            if not active[q]:
                del active[q]
            i += 1
        if active:
            out.add(frozenset(active))
    return out


def dfa_states(node: Node) -> int:
    """The DFA states the subset construction reaches, or NotCheap past ``MAX_STATES``."""
    auto = _Automaton()
    _, first, _ = _build(node, auto)
    start: frozenset[int] = frozenset({-1})
    seen = {start}
    todo = [start]
    budget = [MAX_WORK]
    while todo:
        state = todo.pop()
        candidates = set(first) if state == start else set().union(*(auto.follow[q] for q in state))
        for nxt in _segments(candidates, auto.chars, budget):
            if nxt not in seen:
                seen.add(nxt)
                if len(seen) > MAX_STATES:
                    raise NotCheap(f"its automaton has more than {MAX_STATES} states")
                todo.append(nxt)
    return len(seen)


def parse(regex: str, unanchored: bool = False) -> Node:
    """The regex's syntax tree, anchors taken off (``.*`` put in their place on a side
    without one when ``unanchored``); NotCheap when it is outside the subset."""
    if len(regex) > MAX_LENGTH:
        raise NotCheap(f"longer than {MAX_LENGTH} characters")
    body = regex
    head = body.startswith("^")
    body = body[1:] if head else body
    tail = body.endswith("$") and not body.endswith("\\$")
    body = body[:-1] if tail else body
    parser = _Parser(body)
    node = parser.alternation()
    if parser.at != len(body):
        raise NotCheap("an unbalanced parenthesis")
    anywhere = ("rep", ("chars", ANY), 0, None)
    if unanchored:
        node = ("cat", [*([] if head else [anywhere]), node, *([] if tail else [anywhere])])
    return node


@lru_cache(maxsize=4096)
def why_not_cheap(regex: str, unanchored: bool = False) -> str | None:
    """None when ``regex`` is cheap to compile (module docstring), else why it is not."""
    try:
        dfa_states(parse(regex, unanchored))
    except NotCheap as exc:
        return str(exc)
    except RecursionError:
        return "nested too deeply"
    return None


def cheap(regex: str, unanchored: bool = False) -> bool:
    return why_not_cheap(regex, unanchored) is None
