"""What counting alone costs on the new-64-KiB workload (issue 43): the floor under the gateway.

    taskset -c 0 python bench/count_floor.py [--encoding o200k_base] [--rounds 3] [--json out.json]

bench/overhead.py --new-64k sends one new, unique 64 KiB message per request (bench/post.lua:
a "#<stamp>-<n> " head on one of bench/agent_texts.py's 131 pieces). Every such text is new to
the gateway, so the work stage must count it exactly (a reservation never undercounts) with
the counter the gateway would pick: bpe-openai's count where the fastcount extra is
installed (tokenize/fast_bpe.py), else tiktoken's. This times that count, on the same texts,
by the thread's CPU, and prints microseconds per text: set beside TensorZero's CPU per request
in the same run, it says how far below the gateway's whole cost a bar on that ratio can go.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from agent_texts import POOLS, pieces  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--encoding", default="o200k_base")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()

    from tokenward.tokenize.fast_bpe import exact_count
    from tokenward.tokenize.tiktoken_files import load_encoding

    encoding = load_encoding(args.encoding)
    fast = exact_count(args.encoding, encoding)
    counter_name = "bpe-openai" if fast is not None else "tiktoken"
    count = fast if fast is not None else (lambda text: len(encoding.encode_ordinary(text)))
    size, number = POOLS["new_65536.txt"]
    texts = pieces(size, number, 2 * 7919)   # the pool's offset in agent_texts.write_pools
    count(texts[0])   # loads the automaton
    rounds = []
    tokens = 0
    for r in range(args.rounds):
        started = time.thread_time()
        tokens = 0
        for i, text in enumerate(texts):
            tokens += count(f"#{r}-{i} {text}")
        rounds.append((time.thread_time() - started) * 1e6 / len(texts))
    result = {"counter": counter_name, "encoding": args.encoding, "texts": len(texts),
              "mean_tokens": tokens / len(texts), "us_per_text": rounds, "median_us": sorted(rounds)[len(rounds) // 2]}
    print(f"{counter_name} {args.encoding}: {len(texts)} texts of 64 KiB, {tokens / len(texts):,.0f} tokens each; "
          f"CPU per count {', '.join(f'{x:,.1f}' for x in rounds)} us (median {result['median_us']:,.1f})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
