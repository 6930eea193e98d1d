"""What a chat template adds around each message, per model family.

A served model's prompt is its chat template rendered over the messages: a few special
tokens and the role around every message, and a header that primes the reply. The
per-message and reply overheads a counter uses come from the family's template, counted
with the model's own tokenizer at start-up, so an exact tokenizer gives the server's own
prompt count (checked against llama.cpp's server in tests/e2e/test_llama_cpp.py):

    family    message                                                        reply
    chatml    <|im_start|>{role}\\n{content}<|im_end|>\\n                       <|im_start|>assistant\\n
    llama3    <|start_header_id|>{role}<|end_header_id|>\\n\\n{content}<|eot_id|>  (same header, assistant)
    gemma     <start_of_turn>{role}\\n{content}<end_of_turn>\\n                  <start_of_turn>model\\n
    phi3      <|{role}|>\\n{content}<|end|>\\n                                   <|assistant|>\\n
    openai    OpenAI's published accounting: 3 per message, 1 per name, 3 for the reply

``models.<name>.chat_template`` names the family. Left out, a ``tokenizer.json`` is
looked at for its family's special tokens (``<|im_start|>``: chatml, ...), a tiktoken
model is taken as ``openai``, and anything else keeps the counter's conservative
defaults (at least every family above adds). The role's own tokens are counted per
message by the request counter, not here.
"""

from __future__ import annotations

from dataclasses import dataclass

from .counters import Counter, HfCounter


@dataclass(frozen=True)
class ChatTemplate:
    name: str
    message: str = ""        # literal text around one message: {role} and {content} mark the holes
    reply: str = ""          # the header that primes the reply
    bos: str = ""            # added once, at the start of the prompt
    marker: str = ""         # a special token that identifies the family in a tokenizer


TEMPLATES: dict[str, ChatTemplate] = {t.name: t for t in (
    ChatTemplate("chatml", "<|im_start|>{role}\n{content}<|im_end|>\n", "<|im_start|>assistant\n",
                 marker="<|im_start|>"),
    ChatTemplate("llama3", "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>",
                 "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|begin_of_text|>",
                 marker="<|start_header_id|>"),
    ChatTemplate("gemma", "<start_of_turn>{role}\n{content}<end_of_turn>\n", "<start_of_turn>model\n", "<bos>",
                 marker="<start_of_turn>"),
    ChatTemplate("phi3", "<|{role}|>\n{content}<|end|>\n", "<|assistant|>\n", marker="<|end|>"),
    ChatTemplate("openai"),
)}
FAMILIES = tuple(TEMPLATES)


def _literal_pieces(message: str) -> list[str]:
    pieces: list[str] = []
    for part in message.split("{content}"):
        pieces.extend(p for p in part.split("{role}") if p)
    return pieces


def detect(counter: Counter) -> ChatTemplate | None:
    """The family a counter's vocabulary belongs to, from its special tokens."""
    if counter.kind == "tiktoken":
        return TEMPLATES["openai"]
    if not isinstance(counter, HfCounter):
        return None
    tokenizer = counter.tokenizer
    for template in TEMPLATES.values():
        if template.marker and tokenizer.token_to_id(template.marker) is not None:
            return template
    return None


def apply(counter: Counter, template: ChatTemplate) -> None:
    """Set the counter's overheads from the template, counted with the counter itself."""
    counter.template = template.name
    if template.name == "openai":
        counter.message_overhead, counter.name_overhead, counter.reply_overhead = 3, 1, 3
        return
    count = counter.count
    counter.message_overhead = sum(count(piece) for piece in _literal_pieces(template.message))
    counter.reply_overhead = count(template.reply) + (count(template.bos) if template.bos else 0)
    # Most templates of these families drop a message's name; a name still costs its own
    # tokens (counted per message), plus this one, so a template that renders it is covered.
    counter.name_overhead = 1
