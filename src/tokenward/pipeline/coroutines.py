"""Whether a stage's decision is still to be awaited, asked once per type.

``isinstance(value, collections.abc.Coroutine)`` runs ``ABCMeta.__instancecheck__``, a Python
function (~1,000 instructions), on every call; a compiled module's coroutines are of their own
types, so ``types.CoroutineType`` would not tell. A stage returns values of a handful of types
(a refusal, an answer, one coroutine type per ``async def``): the answer per type is kept.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Final

from typing_extensions import TypeIs

# type -> is it a coroutine; bounded by the number of types in the program's code
_KNOWN: Final[dict[type, bool]] = {}


def is_coroutine(value: object) -> TypeIs[Coroutine[Any, Any, Any]]:
    kind = type(value)
    known = _KNOWN.get(kind)
    if known is None:
        known = _KNOWN[kind] = isinstance(value, Coroutine)
    return known
