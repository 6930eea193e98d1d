"""Fixtures any test module may ask for."""

from __future__ import annotations

import gc

import openai
import pytest


def pytest_collection_finish(session) -> None:
    """As `tokenward serve` does after start-up (app.py): what the imports and the
    collection left is frozen, so no full collection walks it again. One walk of this heap
    held an in-process gateway's event loop for 115-150 ms, enough to fail a test that
    times its answers (tests/budget/test_store_pause.py)."""
    gc.collect()
    gc.freeze()


@pytest.fixture
async def sdk_clients_closed(monkeypatch):
    """Every official SDK client the test makes is closed in the test's own event loop.

    Left to the garbage collector, the SDK closes its HTTP client in whatever loop is
    running at that moment, a later test's, where the close fails ("Event loop is closed")
    and is logged as an error in that test."""
    made: list[openai.AsyncOpenAI] = []
    init = openai.AsyncOpenAI.__init__

    def tracked(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(openai.AsyncOpenAI, "__init__", tracked)
    yield
    for client in made:
        await client.close()
