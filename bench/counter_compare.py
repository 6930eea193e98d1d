"""Exact token counters on the same texts (issue 43): time per text and agreement with tiktoken.

    taskset -c 1 python bench/counter_compare.py [--rounds 5] [--json out.json]

Candidates (each only where installed; ``pip install bpe-openai rs-bpe tokie kitoken``):

- ``tiktoken``: ``Encoding.encode_ordinary`` on the vocabulary tokenward loads (the count is
  the length of the ids);
- ``rs-bpe``: ``rs_bpe.bpe.openai.<encoding>().count`` (its own copy of the vocabulary);
- ``bpe-openai``: ``bpe_openai._bindings.tokenizer_for_encoding(name).count`` (the crate's
  count without building the id list) and its tiktoken-shaped ``Encoding.encode``;
- ``tokenizers`` (Hugging Face): a ``tokenizer.json`` built from tiktoken's own ranks the way
  transformers' ``TikTokenConverter`` does (BPE merges recovered from the ranks, tiktoken's
  split pattern as a ``Split`` pre-tokenizer, then byte-level), ``encode(...).ids``;
- ``kitoken``: ``Kitoken.from_tiktoken`` on the same vocabulary file, ``encode``;
- ``tokie``: ``Tokenizer.from_json`` on the tokenizer.json above, ``count_tokens``.

Texts: Python's stdlib sources (bench/agent_texts.py: the 64 KiB text of the agents'
workload, a 4 KiB history message), the bodies of the agent captures in
tests/fixtures/agents (their message texts joined), and generated stress texts (long
whitespace runs, one repeated character, digits, mixed scripts). Reported per counter and
text: the least of ``--rounds`` timings (each the mean over enough calls to take ~0.2 s)
and whether every count equals tiktoken's.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_texts import pieces, stdlib_text  # noqa: E402
from harness import REPO  # noqa: E402

ENCODINGS = ("o200k_base", "cl100k_base")


def agent_fixture_texts() -> list[str]:
    """The text of each captured agent request: every string in its body, joined."""
    out = []
    for path in sorted((REPO / "tests" / "fixtures" / "agents").glob("*.json")):
        for request in json.loads(path.read_text())["requests"]:
            strings: list[str] = []

            def walk(value: object) -> None:
                if isinstance(value, str):
                    strings.append(value)
                elif isinstance(value, list):
                    for item in value:
                        walk(item)
                elif isinstance(value, dict):
                    for item in value.values():
                        walk(item)

            walk(request.get("body"))
            if strings:
                out.append("\n".join(strings))
    return out


def stress_texts() -> dict[str, str]:
    rng = random.Random(43)
    words = stdlib_text(200_000).split()
    return {
        "spaces 16 KiB run": "x" + " " * 16384 + "y",
        "one char x 16 KiB": "a" * 16384,
        "digits 16 KiB": "".join(rng.choice("0123456789 ,.") for _ in range(16384)),
        "mixed scripts 16 KiB": "".join(rng.choice(["naïve café ", "日本語のテキスト", "Привет мир ", "🙂🚀 ",
                                                    rng.choice(words) + " "]) for _ in range(2000))[:16384],
    }


def texts() -> dict[str, str]:
    out = {"stdlib 64 KiB": stdlib_text(65536), "stdlib 4 KiB": pieces(4096, 1, 1000)[0]}
    fixtures = agent_fixture_texts()
    out["agent captures (each)"] = "\x00".join(fixtures)   # split again below: counted one by one
    out.update(stress_texts())
    return out


def byte_chars() -> dict[int, str]:
    """GPT-2's byte -> printable character map, which byte-level BPE vocabularies are written in."""
    shown = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = shown[:]
    extra = 0
    for b in range(256):
        if b not in shown:
            shown.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(shown, map(chr, chars)))


def hf_tokenizer_json(encoding) -> str:
    """A tokenizer.json equal in intent to tiktoken's encoding, as transformers' converter
    builds one: merges recovered from the ranks, tiktoken's split pattern, byte-level."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    ranks: dict[bytes, int] = encoding._mergeable_ranks
    table = byte_chars()

    def show(token: bytes) -> str:
        return "".join(table[b] for b in token)

    vocab = {show(token): rank for token, rank in ranks.items()}
    merges = []
    for token, rank in ranks.items():
        if len(token) == 1:
            continue
        local = [(token[:i], token[i:], rank) for i in range(1, len(token))
                 if token[:i] in ranks and token[i:] in ranks]
        local.sort(key=lambda m: (ranks[m[0]], ranks[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2])
    tok = Tokenizer(models.BPE(vocab, [(show(a), show(b)) for a, b, _ in merges], fuse_unk=False,
                               byte_fallback=False, ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(encoding._pat_str), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    return tok.to_str()


def counters(name: str) -> dict[str, Callable[[str], int]]:
    sys.path.insert(0, str(REPO / "src"))
    from tokenward.tokenize.tiktoken_files import load_encoding

    encoding = load_encoding(name)
    encode = encoding.encode_ordinary
    out: dict[str, Callable[[str], int]] = {"tiktoken": lambda text: len(encode(text))}
    try:
        import rs_bpe.bpe as rs
        out["rs-bpe count"] = getattr(rs.openai, name)().count
    except ImportError:
        pass
    try:
        from bpe_openai import _bindings, get_encoding
        out["bpe-openai count"] = _bindings.tokenizer_for_encoding(name).count
        bpe_encode = get_encoding(name).encode
        out["bpe-openai encode"] = lambda text: len(bpe_encode(text))
    except ImportError:
        pass
    hf_json = None
    try:
        from tokenizers import Tokenizer
        hf_json = hf_tokenizer_json(encoding)
        hf = Tokenizer.from_str(hf_json)
        out["tokenizers"] = lambda text: len(hf.encode(text, add_special_tokens=False).ids)
    except ImportError:
        pass
    try:
        import kitoken
        from tokenward.tokenize import tiktoken_files
        ki = kitoken.Kitoken.from_tiktoken(tiktoken_files._read_vocabulary(name))
        out["kitoken"] = lambda text: len(ki.encode(text, False))
    except ImportError:
        pass
    except Exception as exc:   # noqa: BLE001  a candidate that cannot load this vocabulary is a row that says so
        print(f"kitoken: {exc}", file=sys.stderr)
    try:
        import tokie
        if hf_json is not None:
            path = Path("/tmp") / f"counter_compare_{name}.json"
            path.write_text(hf_json)
            tk = tokie.Tokenizer.from_json(str(path))
            out["tokie"] = tk.count_tokens
    except ImportError:
        pass
    except Exception as exc:   # noqa: BLE001
        print(f"tokie: {exc}", file=sys.stderr)
    return out


def timed(count: Callable[[str], int], items: list[str], rounds: int) -> float:
    """Least, over rounds, of the mean time to count every item once (seconds)."""
    reps = max(1, int(0.2 / max(_once(count, items), 1e-6)))
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(reps):
            for text in items:
                count(text)
        best = min(best, (time.perf_counter() - started) / reps)
    return best


def _once(count: Callable[[str], int], items: list[str]) -> float:
    started = time.perf_counter()
    for text in items:
        count(text)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    results: dict = {}
    all_texts = texts()
    for name in ENCODINGS:
        found = counters(name)
        reference = found["tiktoken"]
        print(f"\n{name}")
        print(f"{'text':<26}" + "".join(f"{label:>20}" for label in found))
        for label_text, text in all_texts.items():
            items = text.split("\x00")
            want = [reference(t) for t in items]
            row = {}
            cells = []
            for label, count in found.items():
                try:
                    exact = [count(t) for t in items] == want
                    seconds = timed(count, items, args.rounds)
                except Exception as exc:   # noqa: BLE001  a counter that fails a text is recorded, not fatal
                    row[label] = {"error": repr(exc)[:200]}
                    cells.append(f"{'error':>20}")
                    continue
                row[label] = {"us": seconds * 1e6, "exact": exact}
                cells.append(f"{seconds * 1e6:>12.1f} us {'=' if exact else '!':>2}  ")
            results.setdefault(name, {})[label_text] = {"tokens": sum(want), "bytes": len(text.encode()), **row}
            print(f"{label_text[:25]:<26}" + "".join(cells) + f"   ({sum(want)} tokens)")
    print("\n'=': every count equal to tiktoken's; '!': some count differs")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
