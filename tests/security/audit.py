"""The timing audit's parts: texts nobody has sent, the interleaved rounds, the test statistic.

A round: two fresh texts of one length; tenant A sends one of them (which one: a coin); a
bystander, tenant C, sends a few fresh texts of its own; then tenant B sends both, in an
order a second coin picks, and each of B's two requests is timed.
Under isolation the two are alike to B (neither was ever B's), so which one was A's is a
label that cannot matter: swapping it within a round leaves the distribution unchanged.
That is what the test checks: a paired permutation test (each round's label flipped at
random, the Wilcoxon signed-rank statistic of the differences, two-sided). Pairing within a
round is why it holds on a loaded machine: whatever slows the host down slows both requests
of a round alike, and drift over the run cancels.

Why the bystander: the processor keeps what the last requests touched (the tokenizer's
vocabulary entries, the detectors' tables, in its caches), so the request right after A's
reads the same text faster whoever sends it. Measured in this process with a 2 KB text: B
right after A 664 against 975 us of CPU (p < 1e-4); after 2 other requests 674 against 708
(p = 0.03); after 4, p = 0.59; after 8, 16 and 32 (200 rounds each), p = 0.89, 0.30, 0.62.
No gateway keeps that, nor can take it away (docs/security.md, "Timing between tenants");
on a gateway in use, other requests come in between anyway. The audit is for what the gateway keeps, which lasts thousands of requests:
it puts ``BYSTANDER`` requests between A's and B's.

The texts are random sequences of the words of Python's own documentation (``pydoc_data``),
cut to an exact length, drawn from one seeded generator: the two texts of a round come from
the same distribution, and the coin, not the text, decides which is A's.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Awaitable, Callable

import numpy as np


def _vocabulary() -> list[str]:
    from pydoc_data.topics import topics

    return sorted(set(re.findall(r"[a-z]{3,12}", " ".join(topics.values()))))


class Texts:
    """Fresh texts of an exact length, never the same twice."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._words = _vocabulary()
        self._made = 0

    def __call__(self, size: int) -> str:
        self._made += 1
        parts = [f"document {self._made}:"]
        length = len(parts[0])
        while length < size:
            word = self._rng.choice(self._words)
            parts.append(word)
            length += len(word) + 1
        return " ".join(parts)[:size]


@dataclass
class Rounds:
    """B's timings per round: the text A had just sent, and a fresh one."""

    recent: list[float] = field(default_factory=list)
    fresh: list[float] = field(default_factory=list)

    def differences(self) -> np.ndarray:
        return np.asarray(self.recent, dtype=float) - np.asarray(self.fresh, dtype=float)

    def medians(self) -> tuple[float, float]:
        return float(np.median(self.recent)), float(np.median(self.fresh))


# send(tenant, text) -> how long that request took (any unit)
Send = Callable[[str, str], Awaitable[float]]
BYSTANDER = 8                 # tenant C's requests between A's and B's, in each round
BYSTANDER_CHARS = 2_000


async def interleaved(send: Send, texts: Texts, size: int, rounds: int, seed: int,
                      bystander: int = BYSTANDER) -> Rounds:
    coin = random.Random(seed)
    out = Rounds()
    for _ in range(rounds):
        first, second = texts(size), texts(size)
        recent, fresh = (first, second) if coin.random() < 0.5 else (second, first)
        await send("a", recent)
        for _ in range(bystander):
            await send("c", texts(BYSTANDER_CHARS))
        pair = [("recent", recent), ("fresh", fresh)]
        coin.shuffle(pair)
        for label, text in pair:
            getattr(out, label).append(await send("b", text))
    return out


def paired_permutation_p(d: np.ndarray, permutations: int = 20_000, seed: int = 0) -> float:
    """Two-sided p of the paired permutation test on the rounds' differences ``d``: the
    statistic is Wilcoxon's signed rank (sum of sign(d) x rank(|d|)), its null distribution
    that of each round's label flipped at random (``permutations`` draws)."""
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    ranks = np.argsort(np.argsort(np.abs(d))) + 1.0
    observed = abs(float(np.sum(np.sign(d) * ranks)))
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(permutations, d.size))
    flipped = np.abs(signs @ ranks)
    return float((1 + np.count_nonzero(flipped >= observed - 1e-9)) / (permutations + 1))
