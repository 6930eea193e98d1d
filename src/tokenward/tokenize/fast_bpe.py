"""A faster exact count for tiktoken's encodings, from the ``fastcount`` extra (bpe-openai).

``bpe-openai`` (PyPI, MIT, abi3 wheels for Linux x86_64 and aarch64 and macOS) binds
GitHub's ``bpe-openai`` Rust crate (github/rust-gems), which counts cl100k_base and
o200k_base tokens without building the list of ids, in time linear in the text: 1.5-2.5x
faster than tiktoken on source code and prose, and 15-25x on long runs of one character,
where tiktoken's merge loop is quadratic (docs/benchmarks.md, "Counting a new text").
It must give tiktoken's count exactly, since a reservation must never undercount, and it
does on every text tests/tokenize/test_fast_bpe.py tries (hypothesis, the stdlib's
sources, the agent captures); the version is pinned in pyproject.toml for that reason.

Three guards keep the count tiktoken's even so:

- it is used only for an encoding it supports, and only after it agrees with tiktoken on
  ``PROBES`` (code, prose in several scripts, digits, whitespace runs, contractions): a
  package whose vocabulary or split rules drifted is not used, and the log says so;
- a text it cannot take (a lone surrogate, which JSON can carry) is counted by tiktoken;
- without the package, tiktoken counts, as before.

The count is read through ``_bindings.tokenizer_for_encoding(name).count``: the binding's
own typed entry point (the package ships its stubs); its tiktoken-shaped ``Encoding`` builds
the ids first and is slower than tiktoken's ``encode_ordinary`` on short texts. The extension
is loaded by itself, from the package's directory: the package's ``__init__`` reads all three
of its vocabularies into Python dicts for metadata nobody here asks for (1.1 s and +60 MiB
per worker, measured). Each encoding's automaton costs ~66 MiB of memory once counted
(o200k_base; tiktoken's own is ~75 MiB and stays loaded as the reference).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import tiktoken

log = logging.getLogger(__name__)

PROBES = (
    "def count(text: str) -> int:\n    return len(encode(text))  # 42\n\n\n\tif x:\r\n        pass\n",
    "The quick brown fox's tail; we'll see what they've done, HE'LL SAY IT'S OURS.",
    "naïve café, Übergrößenträger, Ελληνικά, русский текст, 日本語のテキスト, 한국어, العربية, हिन्दी",
    "1234567890 3.14159 1,000,000 0x1F600 2026-12-07T15:21:09Z +1 (555) 010-9999",
    "emoji 🙂🚀👍🏽 and a ZWJ family 👨‍👩‍👧 and flags 🇫🇷🇯🇵",
    " " * 300 + "x" + "\n" * 40 + "y" + "a" * 500 + "!!!???..." * 20,
    "\u00a0\u2003\u3000 mixed\u200bwidth\ufeff spaces \x0b\x0c and controls \x00\x01\x7f",
)


def exact_count(name: str, encoding: tiktoken.Encoding) -> Callable[[str], int] | None:
    """bpe-openai's count for ``name`` when installed and in agreement with ``encoding``
    (tiktoken's) on every probe, else None."""
    _bindings = _load_bindings()
    if _bindings is None or name not in _bindings.supported_encodings():
        return None
    count: Callable[[str], int] = _bindings.tokenizer_for_encoding(name).count
    encode = encoding.encode_ordinary
    for probe in PROBES:
        if count(probe) != len(encode(probe)):
            log.warning("bpe-openai counts %s differently from tiktoken on a probe text: tiktoken counts", name)
            return None

    def exact(text: str) -> int:
        try:
            return count(text)
        except UnicodeEncodeError:   # a lone surrogate: tiktoken's own handling of it
            return len(encode(text))

    return exact


_MODULE = "bpe_openai._bindings"


def _load_bindings() -> ModuleType | None:
    """The binding's extension module alone, without running the package's ``__init__``;
    None where the package is not installed or its extension does not load."""
    try:
        package = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        return None
    if package is None or not package.submodule_search_locations:
        return None
    for directory in package.submodule_search_locations:
        for path in sorted(Path(directory).glob("_bindings*.so")):
            try:
                loader = importlib.machinery.ExtensionFileLoader(_MODULE, str(path))
                spec = importlib.util.spec_from_file_location(_MODULE, str(path), loader=loader)
                if spec is None:
                    continue
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                return module
            except ImportError as exc:   # a wheel for another platform or Python: tiktoken counts
                log.warning("bpe-openai's extension did not load (%s): tiktoken counts", exc)
    return None
