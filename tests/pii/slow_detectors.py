"""PII screeners for the budget tests (``detector: python:tests.pii.slow_detectors:NAME``):
each answers after 80 ms, one with no budget of its own (the stage's 25 ms applies), one
declaring 250 ms as Presidio's screener does."""

from __future__ import annotations

import asyncio

from tokenward.screening.screener import ScreenResult


class Slow:
    name = "slow"

    def screen(self, texts):
        return asyncio.sleep(0.08, ScreenResult(0.0, []))


def slow(**_):
    return Slow()


def slow_with_budget(**_):
    screener = Slow()
    screener.default_timeout_ms = 250.0
    return screener
