"""Per-message overheads from a chat template, counted with the model's tokenizer."""

from __future__ import annotations

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from tokenward.config import parse_config
from tokenward.tokenize.counters import MAX_TOKEN_BYTES, EstimateCounter
from tokenward.tokenize.registry import TokenizerRegistry, build_counter


def chatml_tokenizer(path) -> str:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|im_start|>", "<|im_end|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["user assistant hello there"] * 50, trainer)
    file = path / "tokenizer.json"
    tok.save(str(file))
    return str(file)


def registry(tmp_path, **model) -> TokenizerRegistry:
    import yaml

    raw = {"upstreams": {"u": {"base_url": "http://127.0.0.1:1/v1"}}, "models": {"m": {"upstream": "u", **model}}}
    return TokenizerRegistry(parse_config(yaml.safe_dump(raw), environ={}))


def test_chatml_is_detected_and_its_overheads_counted(tmp_path):
    counter = registry(tmp_path, tokenizer="hf:" + chatml_tokenizer(tmp_path)).counters["m"]
    # <|im_start|> + "\n" + <|im_end|> + "\n" around each message; <|im_start|> assistant "\n" for the reply
    assert counter.template == "chatml"
    assert counter.message_overhead == 4
    assert counter.reply_overhead == 2 + counter.count("assistant")


def test_a_named_template_wins_and_tiktoken_is_openai(tmp_path):
    named = registry(tmp_path, tokenizer="hf:" + chatml_tokenizer(tmp_path), chat_template="openai").counters["m"]
    assert (named.template, named.message_overhead, named.reply_overhead) == ("openai", 3, 3)
    tik = registry(tmp_path, tokenizer="tiktoken:cl100k_base").counters["m"]
    assert (tik.template, tik.message_overhead) == ("openai", 3)
    plain = registry(tmp_path).counters["m"]
    assert plain.template is None and plain.message_overhead == 8   # estimate, no template: conservative


def test_estimate_bounds_from_both_sides():
    counter = EstimateCounter()
    assert not counter.exact and counter.lower_bound(1) == 1 and counter.lower_bound(MAX_TOKEN_BYTES + 1) == 2
    exact = build_counter("tiktoken:cl100k_base")
    assert exact.exact and exact.lower_bound(77) == 77
