"""A served model's own tokenizer: a byte-level BPE trained here in a temp dir gives exact
counts through the registry, the estimate bound holds for it, and the work stage uses it."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from tokenward.config.schema import Config, ModelConfig, PlanConfig, UpstreamConfig
from tokenward.errors import Reason
from tokenward.pipeline.context import RequestContext
from tokenward.pipeline.results import Principal
from tokenward.stages.s02_edge import Route
from tokenward.stages.s08_validation import ValidationStage
from tokenward.stages.s09_work import WorkStage
from tokenward.tokenize.counters import EstimateCounter
from tokenward.tokenize.registry import TokenizerRegistry

CORPUS = [
    "The gateway admits work, not requests.",
    "Every request passes a fixed pipeline of stages before the backend sees it.",
    "Tokens are counted with the model's own tokenizer, or a safe upper bound.",
    "def count(text): return len(tokenizer.encode(text))",
] * 20


@pytest.fixture(scope="module")
def tokenizer_path(tmp_path_factory):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


@pytest.fixture(scope="module")
def registry(tokenizer_path):
    config = Config(upstreams={"u": UpstreamConfig(base_url="http://127.0.0.1:1")},
                    models={"own": ModelConfig(upstream="u", tokenizer=f"hf:{tokenizer_path}", context_window=100),
                            "same": ModelConfig(upstream="u", tokenizer=f"hf:{tokenizer_path}")})
    return TokenizerRegistry(config)


@pytest.fixture(scope="module")
def reference(tokenizer_path):
    return Tokenizer.from_file(str(tokenizer_path))


@given(st.text(max_size=200))
@settings(max_examples=300, deadline=None)
def test_counts_are_exact(registry, reference, text):
    expected = len(reference.encode(text, add_special_tokens=False).ids)
    counter = registry.for_model("own")
    assert counter.count(text) == expected
    assert EstimateCounter().count(text) >= expected


def test_registry_shares_one_counter_per_spec(registry, reference):
    own = registry.for_model("own")
    assert own is registry.for_model("same")
    assert own.kind == "hf" and own.vocab_size == reference.get_vocab_size(with_added_tokens=True)
    assert own.count("The gateway admits work") < len("The gateway admits work")


async def test_work_stage_uses_the_exact_count(registry):
    counter = registry.for_model("own")
    prompt = "The gateway admits work, not requests. Tokens are counted."
    tokens = counter.count(prompt)
    window = 100

    async def work(max_tokens: int):
        ctx = RequestContext("r", "POST", "/v1/completions", [], None, None, 0)
        ctx.route = Route("/v1/completions", ("POST",), ("application/json",), 1 << 20)
        ctx.body = msgspec.json.encode({"model": "own", "prompt": prompt, "max_tokens": max_tokens})
        ctx.principal = Principal(tenant="t", key_id="k", plan_name="p", plan=PlanConfig(max_output_tokens=500))
        assert await ValidationStage({"own": counter.vocab_size}).admit(ctx) is None
        models = {"own": ModelConfig(upstream="u", context_window=window)}
        return ctx, await WorkStage(models, registry.counters).admit(ctx)

    ctx, refusal = await work(window - tokens)
    assert refusal is None and ctx.work.input_tokens == tokens and ctx.work.tokenizer.startswith("hf:")
    _, refusal = await work(window - tokens + 1)
    assert refusal.reason is Reason.context_too_large
