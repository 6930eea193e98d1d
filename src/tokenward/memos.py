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

The memory bound stays global, and it is a bound in bytes (``memos.max_bytes`` in the config,
64 MiB unless set): every memo's entries, every tenant's, are one table (``Table``) and the
least recently used entry goes first, whichever memo and tenant it belongs to. An entry is
charged what it costs in memory (``ENTRY_BYTES`` for its key and its slot, measured with
tracemalloc, plus its value), not the length of the text it stands for, which it does not
keep: so the bound says how many texts a busy gateway keeps answered, the working set of
its agents' sessions (docs/benchmarks.md: 2,000 sessions of 17 texts take ~8 MiB of counts).
A tenant that floods the memos evicts the others' entries, which makes their requests
slower, never faster, and tells the flooder nothing about what they sent. No text is kept:
the key is the memo, the tenant, Python's per-process keyed SipHash of the text and its
length.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from contextvars import ContextVar
from itertools import count
from typing import Callable, Generic, TypeVar

T = TypeVar("T")

_TENANT: ContextVar[str | None] = ContextVar("tokenward_memo_tenant", default=None)

# what the memos hold at most, over every memo and tenant (config: memos.max_bytes)
MAX_BYTES = 64 * 2**20
# what one entry costs besides its value: the key (a 4-tuple: memo, tenant, hash, length,
# the two ints) and its OrderedDict slot and link, measured with tracemalloc over 100,000
# entries (211 bytes), rounded up for the table's growth steps
ENTRY_BYTES = 240
# shorter texts cost less to read again than to look up
MIN_CHARS = 64

enter = _TENANT.set
"""``enter(tenant)``: the tenant whose memos this request reads and fills (None: none)."""

current = _TENANT.get
"""``current()``: the tenant of the running request, or None outside one."""

_getsizeof = sys.getsizeof


def value_bytes(value: object) -> int:
    """What a memo's value adds to its entry: nothing for a small int, the empty tuple or a
    str (the labels findings carry are the detectors' constants), else its size, tuples
    counted with what they hold."""
    if isinstance(value, int):
        return 0 if -5 <= value <= 256 else 32
    if isinstance(value, tuple):
        return _getsizeof(value) + sum(value_bytes(item) for item in value) if value else 0
    if isinstance(value, str):
        return 0
    return _getsizeof(value)


class Table:
    """Every memo's entries under one bound in bytes, least recently used out first."""

    __slots__ = ("entries", "max_bytes", "bytes")

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.entries: OrderedDict[tuple[int, str, int, int], object] = OrderedDict()
        self.max_bytes = max_bytes
        self.bytes = 0

    def put(self, key: tuple[int, str, int, int], value: object) -> None:
        entries = self.entries
        self.bytes += ENTRY_BYTES + value_bytes(value)
        entries[key] = value
        while self.bytes > self.max_bytes and entries:
            _, old = entries.popitem(last=False)
            self.bytes -= ENTRY_BYTES + value_bytes(old)

    def resize(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        while self.bytes > max_bytes and self.entries:
            _, old = self.entries.popitem(last=False)
            self.bytes -= ENTRY_BYTES + value_bytes(old)

    def drop(self, memo: int) -> None:
        for key in [key for key in self.entries if key[0] == memo]:
            self.bytes -= ENTRY_BYTES + value_bytes(self.entries.pop(key))


TABLE = Table()
_ids = count(1)


def configure(max_bytes: int) -> None:
    """The process's bound (``memos.max_bytes``): set by ``tokenward serve`` and reload."""
    TABLE.resize(max_bytes)


def held() -> dict[str, int]:
    """What the memos hold now: entries, their bytes (as charged), the bound."""
    return {"entries": len(TABLE.entries), "bytes": TABLE.bytes, "bound": TABLE.max_bytes}


class TextMemo(Generic[T]):
    """``compute(text)``, remembered per tenant for texts of ``min_chars`` or more.

    ``compute`` must depend on the text alone (a count, a detector's findings)."""

    __slots__ = ("_compute", "_id", "_table", "min_chars")

    def __init__(self, compute: Callable[[str], T], min_chars: int = MIN_CHARS, table: Table | None = None) -> None:
        self._compute = compute
        self._id = next(_ids)
        self._table = table if table is not None else TABLE
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
        key = (self._id, tenant, hash(text), size)
        table = self._table
        found = table.entries.get(key)
        if found is None:
            found = self._compute(text)
            table.put(key, found)
        else:
            table.entries.move_to_end(key)
        return found   # type: ignore[return-value]  # (the table holds this memo's T under its id)

    __call__ = get

    def __len__(self) -> int:
        memo = self._id
        return sum(1 for key in self._table.entries if key[0] == memo)

    def tenants(self) -> set[str]:
        """The tenants with an entry (tests: the bound is shared, the keys are not)."""
        memo = self._id
        return {key[1] for key in self._table.entries if key[0] == memo}

    def clear(self) -> None:
        self._table.drop(self._id)
