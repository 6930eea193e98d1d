"""Quality and CPU cost of the heuristic injection detector (screening/injection.py).

    python3 bench/injection_eval.py [--misses] [--outside dev|test] [--held-out-source [--no-classifier]]

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

``--held-out-source``: leave one source out (bench/held_out_source.py). Per source held out,
for the heuristic, the classifier and their weighted combination on user messages, and the
``tool_output`` detector on tool results and documents: the threshold chosen on the other
sources, recall, benign and risky-looking benign flagged; then the worst source and the mean
over sources. The held-out-only sources (agentdojo, bastionprobe, pyrit, botocore) are
scored with the choice made on the whole pool. Nothing is printed but counts.
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


CONFIGS = {   # name: (detectors, weighted, channels, risky bar, benign bar)
    "heuristic": (["heuristic"], False, ("user", "document", "tool"), 0.03, 1.0),
    "classifier": (["classifier"], False, ("user", "document", "tool"), 0.05, 1.0),
    "heuristic+classifier weighted": (["heuristic", "classifier"], True, ("user", "document", "tool"), 0.05, 1.0),
    "tool_output (tool results, documents)": (["tool_output"], False, ("tool", "document"), 1.0, 0.02),
    "tool_output+classifier weighted": (["tool_output", "classifier"], True, ("tool", "document"), 1.0, 0.02),
}


def held_out(use_classifier: bool) -> None:
    from bench import held_out_source as loso
    from tokenward.screening.tool_output import ToolOutputInjection

    pool, held = loso.rows_by_source()
    rows = [r for rs in [*pool.values(), *held.values()] for r in rs]
    # the built-in detectors' cached scores are keyed by their code (bench/held_out_source.py)
    detectors = {f"heuristic@{loso.code_version('injection')}":
                 lambda texts: [HeuristicInjection().score([t])[0] for t in texts],
                 f"tool_output@{loso.code_version('injection', 'tool_output')}":
                 lambda texts: [ToolOutputInjection().score([t])[0] for t in texts]}
    if use_classifier:
        from tokenward.screening.classifier import ClassifierInjection

        def classify(texts: list[str]) -> list[float]:
            model = ClassifierInjection()
            try:
                return [model.head.calibrated(p) for p in model.probabilities(texts)]
            finally:
                model.close()
        detectors["classifier"] = classify
    loso.scored(rows, detectors)
    for r in rows:     # the configurations name the detectors without their code version
        r["s"] = {name.split("@")[0]: v for name, v in r["s"].items()}
    for name, (names, weighted, channels, risky_bar, benign_bar) in CONFIGS.items():
        if not all(n in {d.split("@")[0] for d in detectors} for n in names):
            continue
        keep = lambda rs: [r for r in rs if r["channel"] in channels]    # noqa: E731
        p = {s: keep(rs) for s, rs in pool.items() if keep(rs)}
        h = {s: keep(rs) for s, rs in held.items() if keep(rs)}
        results = loso.leave_one_out(p, h, {"detectors": names, "weighted": weighted}, risky_bar, benign_bar)
        print(f"\n{name}: chosen for recall with <= {risky_bar:.0%} risky-looking benign"
              + (f" and <= {benign_bar:.0%} benign" if benign_bar < 1 else "") + " flagged on the other sources")
        print(f"  {'source held out':<26} {'kind':<14} {'w':>4} {'t':>5} {'recall':>14} {'benign flagged':>15} "
              f"{'risky flagged':>14}")
        for source, kind, w, t, c in results:
            recall = f"{c['tp']}/{c['attacks']} ({c['tp'] / c['attacks']:.2f})" if c["attacks"] else "-"
            print(f"  {source:<26} {kind:<14} {w:>4} {t:>5} {recall:>14} {c['fp']:>7}/{c['benign']:<7} "
                  f"{c['risky_fp']:>6}/{c['risky']:<6}")
        sm = loso.summary(results)
        print(f"  worst recall {sm['worst']:.3f}, mean {sm['mean']:.3f}; benign flagged {sm['fp']}/{sm['benign']}, "
              f"risky-looking {sm['risky_fp']}/{sm['risky']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list attacks under 0.6 and benign prompts over it")
    parser.add_argument("--outside", choices=("dev", "test"), help="the outside set's split instead of the own set")
    parser.add_argument("--held-out-source", action="store_true", help="leave-one-source-out figures")
    parser.add_argument("--no-classifier", action="store_true", help="with --held-out-source: built-in detectors only")
    args = parser.parse_args()
    if args.held_out_source:
        held_out(not args.no_classifier)
        return
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
