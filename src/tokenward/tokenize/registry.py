"""One token counter per model, built once at start-up from ``models.<name>.tokenizer``.

Specs:

- ``tiktoken:<encoding>``: ``cl100k_base``, ``o200k_base`` (any encoding tiktoken knows
  whose vocabulary file is available locally, see ``tiktoken_files``); counted by
  bpe-openai where the ``fastcount`` extra is installed and agrees (``fast_bpe``), else
  by tiktoken;
- ``hf:<path to tokenizer.json>``: a served model's own tokenizer, via ``tokenizers``
  (a relative path is relative to the working directory);
- ``estimate`` or ``estimate:<vocab size>``: the UTF-8 byte upper bound; the optional
  vocabulary size bounds token ids sent as prompts.

A spec that cannot be loaded is a ``ConfigError`` naming the model, raised at start-up,
never on a request. Models sharing a spec and a chat template share one counter; the
template (``models.<name>.chat_template``, else detected) sets its per-message overheads
(``templates.py``).
"""

from __future__ import annotations

from ..config.extras import install_hint
from ..config.schema import Config
from ..errors import ConfigError
from . import templates
from .counters import Counter, EstimateCounter, HfCounter, TiktokenCounter
from .fast_bpe import exact_count
from .tiktoken_files import load_encoding



def build_counter(spec: str) -> Counter:
    kind, _, arg = spec.partition(":")
    if kind == "estimate":
        if not arg:
            return EstimateCounter(spec)
        if not arg.isdigit() or int(arg) < 1:
            raise ConfigError("", f"estimate:<vocab size> needs a positive integer, got {arg!r}")
        return EstimateCounter(spec, int(arg))
    if kind == "tiktoken" and arg:
        encoding = load_encoding(arg)
        return TiktokenCounter(spec, encoding, exact_count(arg, encoding))
    if kind == "hf" and arg:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise ConfigError("", f"{spec!r} needs the tokenizers package, in the hf extra: "
                                  f"{install_hint('hf')} (or tiktoken:<encoding>, or estimate)") from None

        try:
            return HfCounter(spec, Tokenizer.from_file(arg))
        except Exception as exc:  # tokenizers raises its own Exception type for bad files
            raise ConfigError("", f"cannot load tokenizer.json {arg!r}: {exc}") from None
    raise ConfigError("", f"unknown tokenizer {spec!r} (expected tiktoken:<encoding>, hf:<path>, or estimate)")


class TokenizerRegistry:
    def __init__(self, config: Config) -> None:
        by_spec: dict[tuple[str, str | None], Counter] = {}
        self.counters: dict[str, Counter] = {}
        for model, spec, family in sorted((m, c.tokenizer, c.chat_template) for m, c in config.models.items()):
            counter = by_spec.get((spec, family))
            if counter is None:
                try:
                    counter = build_counter(spec)
                except ConfigError as exc:
                    raise ConfigError(f"models.{model}.tokenizer", exc.message) from None
                template = templates.TEMPLATES[family] if family is not None else templates.detect(counter)
                if template is not None:
                    templates.apply(counter, template)
                by_spec[(spec, family)] = counter
            self.counters[model] = counter

    def for_model(self, model: str) -> Counter | None:
        return self.counters.get(model)
