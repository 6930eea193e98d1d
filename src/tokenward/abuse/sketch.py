"""Near-duplicate prompts without keeping any text: a MinHash of the normalized prompt's
word shingles, each shingle hashed under the deployment's secret, banded for LSH; only the
keyed hash of each band leaves this module.

Two prompts share a band (so are seen as one campaign) with a probability that rises
steeply with their Jaccard similarity: with 64 permutations in 16 bands of 4 rows, ~0.5
at a similarity of 0.5 and ~0.98 at 0.8 (datasketch's MinHash; the banding is ours, so
the buckets can live in the shared store).
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


class Sketcher:
    def __init__(self, secret: bytes, config: CampaignConfig) -> None:
        from datasketch import MinHash

        self._minhash = MinHash
        self._secret = secret
        self.num_perm = config.num_perm
        self.bands = config.bands
        self.rows = config.num_perm // config.bands
        self.shingle = config.shingle_words
        self.min_chars = config.min_chars
        self._perm = MinHash(num_perm=config.num_perm, scheme="affine32").permutations   # once, reused

    def _hash32(self, shingle: bytes) -> int:
        return int.from_bytes(hashlib.blake2b(shingle, key=self._secret, digest_size=4, person=b"tw-shin").digest(),
                              "little")

    def bands_of(self, texts: Iterable[str]) -> list[str] | None:
        """The keyed band hashes of a prompt (its texts joined); None when too short."""
        text = "\n".join(texts)
        if len(text) < self.min_chars:
            return None
        words = normalize(text)
        k = self.shingle
        if len(words) < k:
            return None
        shingles = [" ".join(words[i:i + k]).encode() for i in range(len(words) - k + 1)]
        sketch = self._minhash(num_perm=self.num_perm, hashfunc=self._hash32, permutations=self._perm,
                               scheme="affine32")
        sketch.update_batch(shingles)
        values = sketch.hashvalues
        out = []
        for band in range(self.bands):
            rows = values[band * self.rows:(band + 1) * self.rows]
            packed = struct.pack("<H%dQ" % len(rows), band, *(int(v) for v in rows))
            out.append(hashlib.blake2b(packed, key=self._secret, digest_size=10, person=b"tw-band").hexdigest())
        return out
