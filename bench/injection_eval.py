"""Quality and CPU cost of the heuristic injection detector (screening/injection.py).

    python3 bench/injection_eval.py [--misses] [--outside dev|test]

Prints the confusion table on the evaluation set (tests/screening/injection_eval.py) at the
restrict (0.6) and block (0.9) thresholds, the CPU time per prompt over the evaluation set
(``time.process_time_ns`` around each ``score`` call; p50/p99, after one warm-up pass that
compiles the per-token regexes) and the median over 2,000 calls for a 2 KB benign English
prompt (plus, for reference, the same length of typographic, German, Russian and Chinese
text). ``--misses`` lists the attacks under 0.6 and the benign prompts at or over 0.6.

``--outside SPLIT``: the same detector on the outside set (bench/eval_sets, built from
third-party packages; tune on ``dev``, report on ``test``): precision, recall, the
false-positive rate on benign and on risky-looking benign prompts, recall by family,
language and channel, CPU per prompt (p50/p99). ``--misses`` lists only counts there
(the test split's texts are not printed: nobody tunes on them by reading them).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

from tests.screening.injection_eval import EVAL  # noqa: E402
from tokenward.screening import injection  # noqa: E402
from tokenward.screening.injection import HeuristicInjection  # noqa: E402

# ~2 KB of ordinary English: a request with a pasted status update.
PROMPT_2KB = (
    "Hi, could you help me turn the notes below into a short update for the leadership team? Keep it under "
    "two hundred words, use plain language, and end with the three decisions we need from them. "
    "Here are my notes from this week. The mobile release slipped by four days because the payment provider "
    "changed their sandbox certificates without notice, and our integration tests started failing on Monday "
    "morning. Priya's team found the cause on Tuesday and the fix went out on Wednesday afternoon. We used the "
    "extra days to close eleven accessibility issues that were planned for the next sprint, so the net effect on "
    "the roadmap is small. Customer support volume is down twelve percent since the new help center went live, "
    "and the average first response time is now under two hours. The biggest remaining complaint is about "
    "invoices: customers in Germany and France want the VAT number printed on every page, and the finance team "
    "says that is a legal requirement we missed. Marcus estimates a week of work for that. On hiring, we made "
    "offers to two backend engineers and one designer; both engineers accepted, and the designer will answer by "
    "Friday. The data platform migration is on track for the end of the quarter, but the old reporting cluster "
    "has to stay up for another month because two dashboards still read from it. Finally, the office move is "
    "confirmed for the second week of next month, and we need to decide whether the team works from home during "
    "that week or uses the coworking space downtown. The decisions I need: first, whether we accept the one "
    "week delay on the invoice fix or move people from the analytics project; second, whether to keep paying for "
    "the old reporting cluster until the dashboards are rebuilt; third, the plan for the week of the move. If "
    "anything in the notes is unclear, ask me before you write the update, and please keep the tone factual "
    "rather than upbeat. Thanks a lot, and let me know if you think anything important is missing from the list. "
    "One more thing: the board meets on Thursday at ten, so I need the draft by Wednesday evening."
)[:2048]
OTHERS = {
    "2 KB typographic English": PROMPT_2KB.replace("'", "’").replace(", and", " — and")[:2040] + " “ok” …",
    "2 KB German": ("Könnten Sie bitte die folgenden Notizen für die Geschäftsleitung zusammenfassen? Die Umstellung "
                    "verzögert sich um vier Tage, weil der Zahlungsanbieter seine Zertifikate geändert hat. " * 12)[:2048],
    "2 KB Russian": ("Пожалуйста, кратко изложите эти заметки для руководства: релиз задержался на четыре дня, "
                     "потому что платёжный провайдер сменил сертификаты. " * 16)[:2048],
    "2 KB Chinese": ("请把下面的笔记整理成给管理层的简短更新：移动版发布推迟了四天，因为支付服务商更换了测试证书。" * 50)[:2048],
}


def table(detector: HeuristicInjection) -> list[tuple[str, float, int]]:
    scored = [(prompt, detector.score([prompt])[0], label) for prompt, label in EVAL]
    print(f"evaluation set: {len(EVAL)} prompts, {sum(l for _, l in EVAL)} attacks, "
          f"{sum(1 - l for _, l in EVAL)} benign")
    print(f"{'threshold':>9} {'TP':>4} {'FP':>4} {'FN':>4} {'TN':>4} {'precision':>9} {'recall':>7}")
    for threshold in (0.6, 0.9):
        tp = sum(1 for _, s, label in scored if s >= threshold and label)
        fp = sum(1 for _, s, label in scored if s >= threshold and not label)
        fn = sum(1 for _, s, label in scored if s < threshold and label)
        tn = sum(1 for _, s, label in scored if s < threshold and not label)
        precision = tp / (tp + fp) if tp + fp else 1.0
        print(f"{threshold:>9} {tp:>4} {fp:>4} {fn:>4} {tn:>4} {precision:>9.3f} {tp / (tp + fn):>7.3f}")
    return scored


def cpu_ns(detector: HeuristicInjection, text: str) -> int:
    started = time.process_time_ns()
    detector.score([text])
    return time.process_time_ns() - started


def cold_pass(detector: HeuristicInjection) -> None:
    injection._WORD_RE.clear()                  # the per-token regexes are compiled on first use
    started = time.process_time_ns()
    for prompt, _ in EVAL:
        detector.score([prompt])
    print(f"first (cold) pass over the set, compiling {len(injection._WORD_RE)} of the "
          f"{len(set(injection._SOURCES[0].values()))} per-token regexes: "
          f"{(time.process_time_ns() - started) / 1e6:.1f} ms CPU\n")


def latency(detector: HeuristicInjection) -> None:
    print()
    per_prompt = sorted(cpu_ns(detector, prompt) for _ in range(20) for prompt, _ in EVAL)
    p50, p99 = per_prompt[len(per_prompt) // 2], per_prompt[int(len(per_prompt) * 0.99)]
    print(f"per prompt over the set (warm, 20 rounds): p50 {p50 / 1000:.1f} us, p99 {p99 / 1000:.1f} us")
    for name, text in {"2 KB benign English": PROMPT_2KB, **OTHERS}.items():
        detector.score([text])
        costs = [cpu_ns(detector, text) for _ in range(2000)]
        print(f"{name} ({len(text)} chars), 2,000 calls: median {statistics.median(costs) / 1000:.1f} us, "
              f"p99 {sorted(costs)[1979] / 1000:.1f} us")


def outside(detector: HeuristicInjection, split: str) -> None:
    from bench.eval_sets import report
    from bench.eval_sets.injection import load

    rows = load(split)
    for r in rows:
        detector.score([r["text"]])                      # warm: the per-token regexes compiled once
    scores, costs = [], []
    for r in rows:
        started = time.process_time_ns()
        scores.append(detector.score([r["text"]])[0])
        costs.append((time.process_time_ns() - started) / 1000)
    print("\n".join(report.summary(f"outside {split} split (bench/eval_sets)", scores, rows)))
    print("\n".join(report.breakdown(scores, rows)))
    p50, p99 = report.percentiles(costs)
    print(f"CPU per prompt: p50 {p50:.1f} us, p99 {p99:.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list attacks under 0.6 and benign prompts over it")
    parser.add_argument("--outside", choices=("dev", "test"), help="the outside set's split instead of the own set")
    args = parser.parse_args()
    detector = HeuristicInjection()
    if args.outside:
        outside(detector, args.outside)
        return
    cold_pass(detector)
    scored = table(detector)
    latency(detector)
    if args.misses:
        print("\nattacks under 0.6:")
        for prompt, s, label in scored:
            if label and s < 0.6:
                print(f"  {s:.3f}  {prompt[:100]!r}")
        print("benign at or over 0.6:")
        for prompt, s, label in scored:
            if not label and s >= 0.6:
                print(f"  {s:.3f}  {prompt[:100]!r}")


if __name__ == "__main__":
    main()
