"""Presidio (``detector: presidio``) on the outside personal-data set, through the gateway's
own masking function, and its screening budget: off the event loop, a default that holds.

Skipped unless the presidio extra is installed. The floors are the measured figures on the
outside test split (docs/pii-presidio.md), below issue 30's targets (names 93%, at most 7%
of planted values reaching the backend), which this detector does not reach: the test holds
what it does reach, so a regression fails.
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("presidio_analyzer")
presidio = pytest.importorskip("tokenward.pii.presidio")
if not any(importlib.util.find_spec(name) for name in presidio.MODEL_PACKAGES):
    pytest.skip("no spaCy English model package installed", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.eval_sets.pii import load, score  # noqa: E402
from tokenward.config.content import PiiScreening  # noqa: E402
from tokenward.screening import screener as screening  # noqa: E402
from tokenward.screening.detectors import pii_screener  # noqa: E402

# Measured on the outside test split, per spaCy model: en_core_web_sm names 187/243 (77.0%),
# 56/475 values reach the backend (11.8%; dev: 110/126, 12/234); en_core_web_md names 217/243
# (89.3%), 32/475 reach it (6.7%; dev: 118/126, 7/234).
FLOORS = {"en_core_web_sm": (0.76, 0.125), "en_core_web_md": (0.88, 0.07)}


@pytest.fixture(scope="module")
def test_score():
    return score(presidio.PresidioDetector().find, load("test"))


def _floors() -> tuple[float, float]:
    return FLOORS["en_core_web_md" if "core_web_md" in (presidio.loaded_model() or "") else "en_core_web_sm"]


def test_names_on_the_outside_test_split(test_score) -> None:
    assert test_score.planted["PERSON"] >= 200
    assert test_score.recall("PERSON") >= _floors()[0]


def test_values_reaching_the_backend(test_score) -> None:
    assert test_score.reached_share() <= _floors()[1], test_score.reached
    for kind in ("PHONE", "CREDIT_CARD", "STREET_ADDRESS", "EMAIL", "IBAN", "US_SSN", "IP_ADDRESS"):
        assert test_score.recall(kind) >= 0.9, kind


def test_name_cues_pay_for_themselves() -> None:
    rows = load("dev")
    with_cues = score(presidio.PresidioDetector().find, rows)
    without = score(presidio.PresidioDetector(names=False).find, rows)
    assert with_cues.found["PERSON"] > without.found["PERSON"]
    assert sum(with_cues.false_pos.values()) <= sum(without.false_pos.values())


def test_default_budget() -> None:
    assert PiiScreening().timeout_ms is None          # the detector's own default
    screener = pii_screener("presidio", None)
    assert screener.default_timeout_ms == presidio.PresidioDetector.DEFAULT_TIMEOUT_MS == 250.0
    assert not hasattr(pii_screener("patterns", None), "default_timeout_ms")   # 25 ms in the stage


def test_runs_off_the_loop_within_its_default_budget() -> None:
    """2 KB prompts at a normal rate (one every 100 ms, or every two single-call times when
    the host is slower than that): the loop keeps ticking meanwhile, and every answer comes
    within the default budget."""
    screener = pii_screener("presidio", None)
    text = (" ".join(r["text"] for r in load("dev")))[:2048]

    async def run() -> tuple[list[float], int]:
        await screening.run(screener, [text[:200]], 5)         # warm
        alone = []
        for _ in range(3):
            t0 = time.perf_counter()
            await screening.run(screener, [text], 5)
            alone.append(time.perf_counter() - t0)
        # normal load: the thread busy about half the time, at this host's current speed
        gap = max(0.1, 2 * statistics.median(alone))
        ticks = 0
        stop = False

        async def ticker() -> None:
            nonlocal ticks
            while not stop:
                ticks += 1
                await asyncio.sleep(0.001)

        tick_task = asyncio.create_task(ticker())
        lat: list[float] = []

        async def one(i: int) -> None:
            await asyncio.sleep(i * gap)
            t0 = time.perf_counter()
            await screening.run(screener, [text], screener.default_timeout_ms / 1000)
            lat.append((time.perf_counter() - t0) * 1000)

        await asyncio.gather(*(one(i) for i in range(12)))
        stop = True
        await tick_task
        return lat, ticks

    # A shared 2-core host under another session's load can stall spaCy past 250 ms once; a
    # detector that blocks the loop or is too slow for its budget overruns again, so a second
    # run decides (as the timing audit re-audits a chance finding before it fails).
    for attempt in range(2):
        try:
            lat, ticks = asyncio.run(run())
            break
        except screening.ScreenerFailed:
            if attempt == 1:
                raise
    assert len(lat) == 12                      # none overran the budget (ScreenerFailed would raise)
    assert ticks > 100                         # the loop ran while spaCy worked
    assert statistics.median(lat) < presidio.PresidioDetector.DEFAULT_TIMEOUT_MS
