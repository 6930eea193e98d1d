"""Near-duplicate prompts without keeping any text: a MinHash of the normalized prompt's
word shingles, each shingle hashed under the deployment's secret, banded for LSH; only the
keyed hash of each band leaves this module.

The MinHash is one-permutation hashing with rotation densification (Shrivastava and Li,
ICML 2014): each distinct shingle is hashed once under the deployment's secret; the hash
picks one of ``num_perm`` bins and a value, and each bin keeps its least value. A bin no
shingle fell into takes the value of the nearest filled bin in its direction (a direction
per bin, drawn from the secret), offset by the distance. Two prompts then agree on a bin
with a probability equal to the Jaccard similarity of their shingle sets, as with
``num_perm`` separate hash functions, at one hash per shingle. It replaced datasketch, which
brought numpy and scipy (~200 MB) into the base install for this one function, and costs
about half of its time (docs/abuse.md).

Two prompts share a band (so are seen as one campaign) with a probability that rises
steeply with their Jaccard similarity: with 64 lanes in 16 bands of 4 rows, ~0.5 at a
similarity of 0.5 and ~0.98 at 0.8. The banding is ours too, so the buckets can live in
the shared store.
"""

from __future__ import annotations

import hashlib
import re
import struct
import unicodedata
from typing import Iterable

from ..config.abuse import CampaignConfig

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_CHARS = 8000   # a longer prompt is sketched from its start


def normalize(text: str) -> list[str]:
    """NFKC, case-folded, punctuation and spacing dropped: the prompt's words."""
    return _WORD.findall(unicodedata.normalize("NFKC", text[:MAX_CHARS]).casefold())


_VALUE_BITS = 50                 # a bin's value: below 2**50, so value + distance * 2**50 < 2**64
_HASH_BYTES = 8


class Sketcher:
    def __init__(self, secret: bytes, config: CampaignConfig) -> None:
        self._secret = secret
        self.num_perm = config.num_perm
        self.bands = config.bands
        self.rows = config.num_perm // config.bands
        self.shingle = config.shingle_words
        self.min_chars = config.min_chars
        bits = hashlib.shake_256(b"tw-directions" + secret).digest(-(-config.num_perm // 8))
        self._step = [1 if bits[i // 8] >> (i % 8) & 1 else -1 for i in range(config.num_perm)]

    def signature(self, texts: Iterable[str]) -> list[int] | None:
        """The MinHash of a prompt (its texts joined), one value per bin; None when too
        short to say anything."""
        text = "\n".join(texts)
        if len(text) < self.min_chars:
            return None
        words = normalize(text)
        k = self.shingle
        if len(words) < k:
            return None
        bins = self.num_perm
        empty = 1 << 64
        least = [empty] * bins
        key, blake = self._secret, hashlib.blake2b
        for shingle in {" ".join(words[i:i + k]).encode() for i in range(len(words) - k + 1)}:
            h = int.from_bytes(blake(shingle, key=key, digest_size=_HASH_BYTES, person=b"tw-shin").digest(), "little")
            at, value = h % bins, (h // bins) & ((1 << _VALUE_BITS) - 1)
            if value < least[at]:
                least[at] = value
        return self._densified(least, empty)

    def _densified(self, least: list[int], empty: int) -> list[int]:
        """Every empty bin takes the nearest filled one's value in its own direction, plus
        its distance times 2**50 (so a borrowed value never equals a bin's own)."""
        bins = self.num_perm
        out = list(least)
        for at in range(bins):
            if least[at] != empty:
                continue
            step = self._step[at]
            distance = 1
            while least[(at + step * distance) % bins] == empty:
                distance += 1
            out[at] = least[(at + step * distance) % bins] + (distance << _VALUE_BITS)
        return out

    def bands_of(self, texts: Iterable[str]) -> list[str] | None:
        """The keyed band hashes of a prompt (its texts joined); None when too short."""
        values = self.signature(texts)
        if values is None:
            return None
        out = []
        for band in range(self.bands):
            rows = values[band * self.rows:(band + 1) * self.rows]
            packed = struct.pack("<H%dQ" % len(rows), band, *rows)
            out.append(hashlib.blake2b(packed, key=self._secret, digest_size=10, person=b"tw-band").hexdigest())
        return out
