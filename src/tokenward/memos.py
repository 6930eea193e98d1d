"""Memos keyed by text, kept per tenant: what one tenant sent never makes another's request faster.

A memo that answers a text it has seen before faster than a new one is a timing oracle: if
every tenant of a process shared it, any tenant could learn whether anyone else had sent a
given document recently, by timing one request that sends it (issue 42: 0.91 ms against
2.79 ms for a 60 KB text, one request enough to tell; Gu et al., "Auditing Prompt Caching in
Language Model APIs", ICML 2025, ran that attack on hosted APIs). So every memo keyed by a
request's text (token counts, detector findings, verdicts, schema checks) keys by the tenant
too: a tenant's own history still hits, another tenant's never does.

The tenant is the request's own, set by ``enter``: the identity stage calls it once the
caller is verified, and the app calls it with None at the start of every request, because
one asyncio task serves a keep-alive connection's requests one after another and the value
would otherwise outlive its request. It is a ``ContextVar`` rather than an argument because
the memos sit at the bottom of call paths that many stages share (``Counter.count`` is
called from the work stage, the dialects' token counts and the stream's usage counter;
``Screener.screen`` from screening); a task copies the value into the tasks it starts, and
``screening.screener.Threaded`` into its threads. Without a tenant (outside a request, a
gateway built without the identity stage) nothing is remembered: a missed memo is slow,
a shared one leaks.

The memory bound stays global: one table per memo, keyed by (tenant, hash, length), the
oldest entry dropped first whoever it belongs to. A tenant that floods a memo evicts the
others' entries, which makes their requests slower, never faster, and tells the flooder
nothing about what they sent. No text is kept: the key is Python's per-process keyed
SipHash of the text and its length.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Callable, Generic, TypeVar

T = TypeVar("T")

_TENANT: ContextVar[str | None] = ContextVar("tokenward_memo_tenant", default=None)

# what a memo holds at most, over every tenant: a busy gateway's working set of repeated
# texts (system prompts, conversation histories), small in memory
ENTRIES = 8192
# shorter texts cost less to read again than to look up
MIN_CHARS = 64

enter = _TENANT.set
"""``enter(tenant)``: the tenant whose memos this request reads and fills (None: none)."""

current = _TENANT.get
"""``current()``: the tenant of the running request, or None outside one."""


class TextMemo(Generic[T]):
    """``compute(text)``, remembered per tenant for texts of ``min_chars`` or more.

    ``compute`` must depend on the text alone (a count, a detector's findings)."""

    __slots__ = ("_compute", "_seen", "_entries", "min_chars")

    def __init__(self, compute: Callable[[str], T], entries: int = ENTRIES, min_chars: int = MIN_CHARS) -> None:
        self._compute = compute
        self._seen: dict[tuple[str, int, int], T] = {}
        self._entries = entries
        self.min_chars = min_chars

    def get(self, text: str) -> T:
        """``compute(text)``, from the running request's tenant's memo when it has it. Hot
        paths hold this bound method: calling it costs ~70 ns less than calling the memo."""
        size = len(text)
        if size < self.min_chars:
            return self._compute(text)
        tenant = current()
        if tenant is None:
            return self._compute(text)
        key = (tenant, hash(text), size)
        seen = self._seen
        found = seen.get(key)
        if found is None:
            found = self._compute(text)
            if len(seen) >= self._entries:
                del seen[next(iter(seen))]   # oldest first, whichever tenant it belongs to
            seen[key] = found
        return found

    __call__ = get

    def __len__(self) -> int:
        return len(self._seen)

    def tenants(self) -> set[str]:
        """The tenants with an entry (tests: the bound is shared, the keys are not)."""
        return {key[0] for key in self._seen}

    def clear(self) -> None:
        self._seen.clear()
