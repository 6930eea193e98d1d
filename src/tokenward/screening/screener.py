"""The ``Screener`` protocol: texts in, a score and spans out; and running one in budget.

A screener reads every caller-controlled text of a request (``texts.py``) and returns a
``ScreenResult``: a score in [0, 1] (injection: how likely an attack; personal data: 1 if
anything was found) and the spans it found, each naming the text, the offsets and what
it is (a signal name, an entity type). It never returns or logs the text itself.

Two shapes, one protocol: ``screen`` returns the result directly (the built-in
detectors: pure CPU, linear time, run inline) or an awaitable (a model in a thread, a
remote service), which ``start`` bounds by the screener's latency budget. A screener that
raises, or does not answer within the budget, is a ``ScreenerFailed``: the policy's
``on_failure`` decides what that means (closed: 503 ``screening_unavailable``; open:
admitted and recorded).
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import inspect
from time import perf_counter_ns
from typing import Awaitable, Callable, Mapping, NamedTuple, Protocol, Sequence, runtime_checkable

from ..validation.texts import Span as Span   # the findings' type, re-exported for the screeners


class ScreenResult(NamedTuple):
    score: float
    spans: list[Span]


@runtime_checkable   # a plugin's factory is checked to return one (``load``)
class Screener(Protocol):
    name: str

    def screen(self, texts: Sequence[str]) -> ScreenResult | Awaitable[ScreenResult]: ...


class SyncScreener(Protocol):
    """A screener that answers at once (the built-in detectors, a model run in a thread)."""

    name: str

    def screen(self, texts: Sequence[str]) -> ScreenResult: ...


class ScreenerFailed(Exception):
    """A screener that raised or overran its budget (``.why``: 'timeout' or 'error')."""

    def __init__(self, why: str, detail: str) -> None:
        super().__init__(detail)
        self.why = why


def start(screener: Screener, texts: Sequence[str],
          timeout_s: float) -> tuple[ScreenResult, float] | Awaitable[tuple[ScreenResult, float]]:
    """(result, microseconds taken) at once from a screener that answers synchronously (the
    built-ins: no coroutine per call on the request's path), else an awaitable of it,
    bounded by ``timeout_s``. Raises ScreenerFailed."""
    started = perf_counter_ns()
    try:
        result = screener.screen(texts)
    except Exception as exc:  # a broken screener is the policy's question, not a 500
        raise ScreenerFailed("error", f"{screener.name} failed: {type(exc).__name__}") from exc
    if type(result) is ScreenResult or not inspect.isawaitable(result):
        return result, (perf_counter_ns() - started) / 1000
    return _bounded(screener, result, timeout_s, started)


async def _bounded(screener: Screener, pending: Awaitable[ScreenResult], timeout_s: float,
                   started: int) -> tuple[ScreenResult, float]:
    try:
        result = await asyncio.wait_for(pending, timeout_s)
    except (asyncio.TimeoutError, TimeoutError):
        raise ScreenerFailed("timeout", f"{screener.name} did not answer within {timeout_s * 1000:g} ms") from None
    except Exception as exc:
        raise ScreenerFailed("error", f"{screener.name} failed: {type(exc).__name__}") from exc
    return result, (perf_counter_ns() - started) / 1000


async def run(screener: Screener, texts: Sequence[str], timeout_s: float) -> tuple[ScreenResult, float]:
    """(result, microseconds taken), whatever the screener's shape; raises ScreenerFailed."""
    ran = start(screener, texts, timeout_s)
    return ran if isinstance(ran, tuple) else await ran


class Threaded:
    """A slow synchronous screener (a model) made awaitable: it runs in a small thread pool,
    so the event loop keeps serving and the policy's latency budget can give up on it. A
    call past its budget still finishes in its thread (a thread cannot be stopped); later
    calls queue behind it, and fail their own budgets while the pool is busy."""

    # The latency budget of a policy that sets no timeout_ms, where the inner model's is known
    # (set by screening/detectors.py; stages/s12_screening.py reads it with a default).
    default_timeout_ms: float

    def __init__(self, inner: SyncScreener, threads: int = 2) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.inner = inner
        self.name = inner.name
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"screen-{inner.name}")

    def screen(self, texts: Sequence[str]) -> Awaitable[ScreenResult]:
        # in the request's context: its tenant keys the inner screener's memo (memos.py)
        run = contextvars.copy_context().run
        return asyncio.get_running_loop().run_in_executor(self._pool, run, self.inner.screen, list(texts))


def load(spec: str, builtins: Mapping[str, Callable[..., Screener]], **kwargs: object) -> Screener:
    """A screener by name: a built-in one, or ``python:module:factory`` (a callable taking the
    same keyword arguments), so an operator can plug in their own without a fork."""
    if spec.startswith("python:"):
        module_name, _, factory_name = spec[len("python:"):].rpartition(":")
        if not module_name or not factory_name:
            raise ValueError(f"expected python:module:factory, got {spec!r}")
        plugin: object = getattr(importlib.import_module(module_name), factory_name)
        made = plugin(**kwargs) if callable(plugin) else None
        if not isinstance(made, Screener):
            raise ValueError(f"{spec} must be a callable returning a screener (a name and screen(texts))")
        return made
    factory = builtins.get(spec)
    if factory is None:
        raise ValueError(f"unknown detector {spec!r} (built in: {', '.join(sorted(builtins))})")
    return factory(**kwargs)
