"""Token counters: exact (tiktoken, a model's tokenizer.json) or a safe upper bound.

Every counter has the same shape: ``count(text)``, ``count_raw(json_bytes)``, a
``vocab_size`` (token ids in prompts are checked against it) and the chat formatting
overheads a chat template adds around each message and before the reply.

``estimate`` is an upper bound that never undercounts: the UTF-8 length in bytes. Every
token of a byte-level BPE vocabulary (tiktoken's, GPT-2/Llama-3/Qwen-style
``tokenizer.json``) stands for at least one byte of the text, so a text of B bytes
encodes to at most B tokens; SentencePiece vocabularies with byte fallback obey the same
bound plus at most one dummy-prefix token per text, which the per-message overhead
covers. Its overheads (8 per message, 8 for the reply) are at least those of the OpenAI
chat format (3 and 3) and of ChatML / Llama-3 templates (4 to 5 special tokens).

An upper bound is what a reservation needs; it is the wrong thing to refuse with: real
text averages 3-5 bytes per token, so a prompt that fits the model four times over
would look too long. ``lower_bound`` is what a refusal may use: no token of those
vocabularies is longer than ``MAX_TOKEN_BYTES`` (cl100k_base's and o200k_base's longest,
128 spaces), so B bytes are at least B / 128 tokens. With ``estimate`` the gateway thus
refuses for context only what is certainly too long, and leaves the rest to the backend,
whose own refusal (``upstream_rejected``) costs no generation. Exact counters' bounds are
their counts.

Exact counters cache counts of longer texts (system prompts and conversation history
are sent again on every turn) in a ``memos.TextMemo``: per tenant, so one tenant's texts
never make another's count faster, keyed by the text's hash and length, never the text, so
no prompt is kept in memory; the hash is Python's per-process keyed SipHash. For the same
reason the ``tokenizers`` library's own word cache is switched off (``HfCounter``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..memos import TextMemo

if TYPE_CHECKING:
    import tiktoken
    import tokenizers

# Token ids without a known vocabulary are at least bounded to what backends store (int32).
UNKNOWN_VOCAB = 2**31 - 1
MAX_TOKEN_BYTES = 128


class Counter:
    spec = "estimate"
    kind = "estimate"
    exact = True
    vocab_size = UNKNOWN_VOCAB
    message_overhead = 8
    name_overhead = 1
    reply_overhead = 8
    template: str | None = None   # the chat template family the overheads come from
    # per message class, its overhead + role tokens: set on first use (tokenize/requests.py)
    _message_costs: dict[type, int]

    def lower_bound(self, tokens: int) -> int:
        """The fewest tokens a prompt this counter counted as ``tokens`` can really be."""
        return tokens

    def count(self, text: str) -> int:
        raise NotImplementedError

    def count_raw(self, raw: bytes) -> int:
        """Tokens of JSON text the template renders into the prompt (tools, schemas)."""
        return self.count(raw.decode("utf-8", "replace"))

    def count_uncached(self, text: str) -> int:
        """For text seen once (a generated answer): no cache entry to evict others with."""
        return self.count(text)


class EstimateCounter(Counter):
    exact = False

    def lower_bound(self, tokens: int) -> int:
        return -(-tokens // MAX_TOKEN_BYTES)

    def __init__(self, spec: str = "estimate", vocab_size: int | None = None) -> None:
        self.spec = spec
        if vocab_size is not None:
            self.vocab_size = vocab_size

    def count(self, text: str) -> int:
        return len(text) if text.isascii() else len(text.encode())

    def count_raw(self, raw: bytes) -> int:
        return len(raw)


class _CachedCounter(Counter):
    """An exact counter with a bounded count memo, per tenant (memos.py)."""

    def __init__(self, spec: str, encode_len: Callable[[str], int], vocab_size: int) -> None:
        self.spec = spec
        self.vocab_size = vocab_size
        self._encode_len = encode_len
        self._cache = TextMemo(encode_len)
        # the memo's lookup is this counter's count: no method around it, one Python call
        # less on every count (a hit: 270 ns with one, ~180 without, as before the memo)
        self.count = self._cache.get   # type: ignore[method-assign]

    def count_uncached(self, text: str) -> int:
        return self._encode_len(text)

    def clear_cache(self) -> None:
        self._cache.clear()


class TiktokenCounter(_CachedCounter):
    kind = "tiktoken"
    # OpenAI's published chat accounting: 3 tokens per message, 1 per name, 3 to prime the reply.
    message_overhead = 3
    name_overhead = 1
    reply_overhead = 3

    def __init__(self, spec: str, encoding: tiktoken.Encoding,
                 fast_count: Callable[[str], int] | None = None) -> None:
        """``fast_count``: the same count, faster (fast_bpe.py: bpe-openai, checked against
        ``encoding`` first); None: tiktoken's own."""
        encode = encoding.encode_ordinary
        super().__init__(spec, fast_count or (lambda text: len(encode(text))), encoding.n_vocab)
        self.encoding = encoding
        self.counted_by = "bpe-openai" if fast_count is not None else "tiktoken"


class HfCounter(_CachedCounter):
    kind = "hf"
    # Chat templates differ per model; these cover ChatML and Llama-3 style headers.
    message_overhead = 8
    name_overhead = 4
    reply_overhead = 8

    def __init__(self, spec: str, tokenizer: tokenizers.Tokenizer) -> None:
        # The library's BPE (and Unigram) models keep a cache of the words they split, filled by
        # every text until it holds 10,000 and shared by every tenant: a word another tenant
        # sent early on would split faster. Off; the per-tenant memo above still serves a
        # tenant's own repeated texts (docs/security.md, "Timing between tenants").
        resize = getattr(tokenizer.model, "_resize_cache", None)
        if resize is not None:
            resize(0)
        encode = tokenizer.encode

        def encode_len(text: str) -> int:
            return len(encode(text, add_special_tokens=False))

        super().__init__(spec, encode_len, tokenizer.get_vocab_size(with_added_tokens=True))
        self.tokenizer = tokenizer
