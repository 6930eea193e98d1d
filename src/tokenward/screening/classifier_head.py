"""The classifier's trained head (screening/classifier.py): its JSON file beside this module
(``classifier_head.json``, written by scripts/train_injection_classifier.py), read into
numpy: dense layers, a logit, Platt calibration, and the map onto the policy's scale."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HEAD_PATH = Path(__file__).with_name("classifier_head.json")


class Head:
    """The trained head from its JSON file: dense layers (ReLU between), a logit, then Platt
    calibration ``sigmoid(a * logit + b)``."""

    def __init__(self, path: Path = HEAD_PATH) -> None:
        spec = json.loads(Path(path).read_text())
        self.layers = [(np.asarray(layer["weights"], dtype=np.float32), np.asarray(layer["bias"], dtype=np.float32))
                       for layer in spec["layers"]]
        if self.layers[-1][0].shape[0] != 1:
            raise ValueError(f"{path}: the last layer must have one output")
        self.platt = (float(spec["calibration"]["a"]), float(spec["calibration"]["b"]))
        # the policy's scale: raw P(injection) mapped piecewise-linearly so that the
        # restrict (0.6) and block (0.9) thresholds fall where the head's stated false-
        # positive rates on held-out data are (none in the file: the raw probability)
        marks = spec.get("thresholds") or {}
        self.marks = [(0.0, 0.0)] + sorted((float(m["raw"]), float(m["score"])) for m in marks.values()) + [(1.0, 1.0)]

    @property
    def input_dim(self) -> int:
        return int(self.layers[0][0].shape[1])

    def logits(self, embeddings: np.ndarray) -> np.ndarray:
        x = embeddings.astype(np.float32)
        for i, (weights, bias) in enumerate(self.layers):
            x = x @ weights.T + bias
            if i < len(self.layers) - 1:
                np.maximum(x, 0, out=x)
        return x[:, 0].astype(np.float64)

    def probabilities(self, embeddings: np.ndarray) -> np.ndarray:
        a, b = self.platt
        return 1.0 / (1.0 + np.exp(-(a * self.logits(embeddings) + b)))

    def calibrated(self, p: float) -> float:
        """A probability on the policy's scale (``thresholds`` in the head file)."""
        return float(np.interp(p, [x for x, _ in self.marks], [y for _, y in self.marks]))
