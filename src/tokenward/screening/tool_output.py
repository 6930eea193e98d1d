"""Injections inside tool output and documents: instructions addressed to the assistant.

A tool result, a fetched page or a file's text is data the assistant reads on the user's
behalf. Such text legitimately holds instructions for *people* ("click here to reset your
password", "you must specify the bucket name", "contact support"); what an injection adds is
an instruction addressed to the *assistant* reading it: a note to the AI, a directive about
its answer or summary, a claim on the task the user gave it, a request to act on a tool
behind the user's back. This detector (``tool_output``) scores those addressings, on top of
the heuristic's signals (screening/injection.py), which it also reads:
``score = 1 - exp(-(z_heuristic + z_addressed))``.

Signals (weights in ``WEIGHTS``):

- ``to_the_ai``: the assistant named as the reader ("note to the AI", "if you are an AI
  assistant", "attention agent", "dear assistant", "AI models reading this", a field named
  ``assistant_directive``, an ``<INFORMATION>`` block, "message from me, X, to you");
- ``about_the_answer``: a directive on the answer ("in your response / summary", "every
  answer that uses this document must", "reply with X instead of answering", "when you
  summarize this");
- ``claims_the_task``: "before you can solve the task I gave you", "your real task",
  "forget my original question";
- ``behind_the_user``: "do not tell the user", "without informing the user", "the user has
  authorized you to";
- ``tool_action``: an action verb (send, forward, transfer, delete, invite, grant...) sent
  *to* a target (``to`` / ``with`` / ``at`` an e-mail address, a URL, an IBAN) in the same
  sentence: a contact line ("Email: info@x.com") names an address and sends nothing; or a tool
  named by its function name ("use the send_email tool", ``delete_file(``);
- ``shout``: "IMPORTANT!!!", "###(system_message)", "SYSTEM NOTE:".

Pure stdlib. The text is lower-cased and split into tokens once; each alternative is tried
anchored where one of the tokens it can start with stands, and only when the text holds a
word it needs (bounded quantifiers): linear time, ~40 us on 2 KB of prose; offsets are into
the original text.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

from .injection import WEIGHTS as HEURISTIC_WEIGHTS
from .injection import HeuristicInjection

_AI = r"(?:ai|a\.i\.|assistant|agent|bot|chatbot|model|llm|language\s+model|copilot|claude|gpt(?:-?\d\w*)?|chatgpt|gemini)"
_AI_FIRST = ("ai", "a", "assistant", "agent", "bot", "chatbot", "model", "llm", "language", "copilot", "claude", "gpt",
             "chatgpt", "gemini", "assistants", "agents", "bots", "chatbots", "models", "llms")
_ANSWER = r"(?:answer|response|reply|summary|output|message|report)"
_TARGET = r"(?:[\w.+-]{1,64}@[\w-]{1,63}\.[\w.-]{2,40}\b|https?://\S{4,}|\b[a-z]{2}\d{2}[a-z0-9]{10,30}\b)"
# (signal, the words an alternative can start with, what the text must hold for it to match at
# all, the alternative from its first word). Matched on the lower-cased text, anchored where one
# of its first words stands as a token, and only when the text holds one of its needs: a text
# costs a split, a few substring scans and a set intersection; a pattern is tried only where it
# could start.
_ALTERNATIVES: tuple[tuple[str, tuple[str, ...], tuple[str, ...], str], ...] = (
    ("to_the_ai", ("note",), ("note",), rf"note\s+(?:to|for)\s+(?:the\s+|any\s+)?{_AI}s?\b"),
    ("to_the_ai", ("if",), ("you",), rf"if\s+you\s+are\s+(?:an?\s+)?(?:ai|automated|{_AI})\b"),
    ("to_the_ai", ("attention", "dear", "hey", "hello"), ("attention", "dear", "hey", "hello"), rf"(?:attention|dear|hey|hello)[,:]?\s+(?:the\s+)?{_AI}s?\b"),
    ("to_the_ai", _AI_FIRST,
     ("reading", "processing", "summarizing", "summarising", "parsing", "ingesting", "indexing"), rf"{_AI}s?\s+(?:reading|processing|summari[sz]ing|parsing|ingesting|indexing)\s+(?:this|these)\b"),
    ("to_the_ai", ("to",), ("reading", "processing", "reads"), rf"to\s+(?:the|any)\s+{_AI}s?\s+(?:reading|processing|that\s+reads)\b"),
    ("to_the_ai", ("assistant_directive", "assistantdirective"), ("assistant_directive", "assistantdirective"), r"assistant_?directive\b"),
    ("to_the_ai", ("information",), ("information",), r"information\s*>"),              # "<information>": "<" checked apart
    ("to_the_ai", ("message",), ("message",), r"message\s+from\s+me\b[^.\n]{0,40}\bto\s+you\b"),
    ("to_the_ai", ("instruction", "instructions"), ("instruction", "instructions"), rf"instructions?\s+(?:for|to)\s+(?:the\s+)?{_AI}s?\b"),
    ("about_the_answer", ("in", "at", "to"),
     ("your",), rf"(?:in|at\s+the\s+(?:end|start|beginning)\s+of|to)\s+your\s+(?:final\s+|next\s+)?{_ANSWER}s?\b"),
    ("about_the_answer", ("every", "any", "each"),
     ("draws", "uses", "relies", "cites", "based", "refers"), rf"(?:every|any|each)\s+{_ANSWER}s?\s+(?:that|which)\s+(?:draws|uses|relies|cites|is\s+based|refers)\b"),
    ("about_the_answer", ("when",), ("when",), r"when\s+(?:you\s+)?(?:summari[sz]|answer|respond|repl(?:y|ies)|cit(?:e|ing)|rewrit)"
                                    r"\w*\s+(?:this|these|the\s+(?:user|question|document))\b"),
    ("about_the_answer", ("instead",), ("answering",), r"instead\s+of\s+answering\b"),
    ("about_the_answer", ("reply", "respond", "answer"), ("with",), r"(?:reply|respond|answer)\s+(?:only\s+)?with\s*[:\"'`]"),
    ("about_the_answer", ("append", "prepend", "add", "include", "insert"),
     ("append", "prepend", "add", "include", "insert"), rf"(?:append|prepend|add|include|insert)\s+(?:the\s+)?(?:exact\s+|following\s+)?"
     rf"(?:token|code|string|phrase|tag|marker|text|line|id|link)\b[^.\n]{{0,60}}\b(?:to|in|at)\s+"
     rf"(?:the\s+end\s+of\s+)?(?:your|every|each|the)\s+{_ANSWER}"),
    ("claims_the_task", ("before",),
     ("task",), r"before\s+you\s+(?:can\s+)?(?:solve|answer|complete|finish|continue|proceed|do)\b[^.\n]{0,40}\btask\b"),
    ("claims_the_task", ("the",), ("gave",), r"the\s+task\s+(?:that\s+)?i\s+gave\s+you\b"),
    ("claims_the_task", ("your",), ("task", "instruction", "instructions", "objective", "goal"), r"your\s+(?:real|actual|true|new|primary)\s+(?:task|instructions?|objective|goal)\b"),
    ("claims_the_task", ("forget", "ignore", "disregard"),
     ("original", "previous", "initial", "first"), r"(?:forget|ignore|disregard)\s+(?:my|the\s+user'?s?|your)\s+(?:original|previous|initial|first)\s+"
     r"(?:question|request|task|query)\b"),
    ("behind_the_user", ("do", "don", "never"),
     ("user",), r"(?:do\s+not|don'?t|never)\s+(?:tell|inform|notify|alert|mention\s+(?:this\s+)?to|warn)\s+the\s+user\b"),
    ("behind_the_user", ("without",), ("user",), r"without\s+(?:telling|informing|notifying|asking|alerting)\s+the\s+user\b"),
    ("behind_the_user", ("the",),
     ("user",), r"the\s+user\s+(?:has\s+)?(?:already\s+)?(?:authori[sz]ed|approved|wants|asked|requests?)\s+(?:you\s+)?to\b"),
    # an action with a target it is sent *to* ("send ... to a@b.c", "transfer ... to GB29..."): a
    # contact line ("Email: info@x.com") names an address but sends nothing anywhere
    ("tool_action", ("send", "email", "e", "forward", "transfer", "wire", "pay", "post", "upload", "share", "invite",
                     "delete", "remove", "grant", "export", "copy"),
     ("@", "http", "https", "0"), rf"(?:send|e-?mail|forward|transfer|wire|pay|post|upload|share|invite|delete|remove|grant|export|copy)\b"
     rf"(?:[^.\n]|\.(?=\S)){{0,80}}?\b(?:to|with|at)\b(?:[^.\n]|\.(?=\S)){{0,30}}?{_TARGET}"),
    ("tool_action", ("use", "call", "invoke", "run"),
     ("_",), r"(?:use|call|invoke|run)\s+(?:the\s+)?`?[a-z]{2,20}_[a-z_]{2,30}`?\s*(?:tool|function|\()"),
    ("shout", ("important",), ("!",), r"important\s*!{2,}"),
    ("shout", ("system",), ("system",), r"system\s+(?:note|notice|message|override)\s*:"),
)
# the two whose first character is not a word's: looked for with str.find
_FUNCTION_CALL = re.compile(r"[a-z]{2,20}_[a-z_]{2,30}\(\s*(?:to|recipient|iban|path|file_id|url|channel|user)\s*=")
_MARKS = re.compile(r"<\s*information\s*>|#{2,}\s*\(\s*system")
# needs are tokens, but for "@", "!", "_" and "0" (any digit: an IBAN), which are characters
_CHARS = frozenset("@!_0")
_COMPILED = [(name, firsts, frozenset(needs) - _CHARS, "".join(sorted(_CHARS.intersection(needs))), re.compile(body))
             for name, firsts, needs, body in _ALTERNATIVES]
_BLANK = {c: " " for c in range(128) if not (chr(c).isalnum() or chr(c) == "_")}
WEIGHTS: dict[str, float] = {"to_the_ai": 1.4, "about_the_answer": 1.0, "claims_the_task": 1.6,
                             "behind_the_user": 1.2, "tool_action": 0.6, "shout": 0.9}
_MAX_SCAN = 200_000          # a text longer than this is read in its first and last 100,000 characters


def _addressings(low: str) -> list[tuple[int, int, str]]:
    """(start, end, signal) in the lower-cased text ``low``."""
    tok = low.translate(_BLANK) if low.isascii() else re.sub(r"\W", " ", low)
    words = set(tok.split())
    chars = {c for c in "@!_" if c in low}
    if any(d in low for d in "0123456789"):
        chars.add("0")
    by_first: dict[str, list[tuple[re.Pattern[str], str]]] = {}
    for name, firsts, needs, needed_chars, regex in _COMPILED:
        if not needs.isdisjoint(words) or any(c in chars for c in needed_chars):
            for w in firsts:
                by_first.setdefault(w, []).append((regex, name))
    hits: list[tuple[int, int, str]] = []
    padded = f" {tok} "
    for w in by_first.keys() & words:
        needle = f" {w} "
        j = padded.find(needle)
        while j >= 0:                        # padded[j] is the blank before the word: low[j] starts it
            for regex, name in by_first[w]:
                if (m := regex.match(low, j)) is not None:
                    hits.append((j, m.end(), name))
            j = padded.find(needle, j + 1)
    if "(" in low and "_" in low:
        hits += [(m.start(), m.end(), "tool_action") for m in _FUNCTION_CALL.finditer(low)]
    if "information" in low or "##" in low:
        hits += [(m.start(), m.end(), "to_the_ai" if m.group()[0] == "<" else "shout") for m in _MARKS.finditer(low)]
    return sorted(hits)


class ToolOutputInjection:
    """Instructions addressed to the assistant inside tool output and documents, plus the
    heuristic's signals; ``score(texts)`` -> ``(score, [(text_index, start, end, signal)])``."""

    name = "tool_output"

    def __init__(self) -> None:
        self._heuristic = HeuristicInjection()

    @staticmethod
    def addressed(text: str) -> list[tuple[int, int, str]]:
        """(start, end, signal) of the addressings in one text."""
        if len(text) > _MAX_SCAN:
            half = _MAX_SCAN // 2
            head = ToolOutputInjection.addressed(text[:half])
            tail = [(a + len(text) - half, b + len(text) - half, n)
                    for a, b, n in ToolOutputInjection.addressed(text[-half:])]
            return head + tail
        low = text.lower()
        if len(low) != len(text):    # a case mapping that changes the length: offsets by character
            low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
        return _addressings(low)

    def signals(self, text: str) -> tuple[tuple[int, int, str], ...]:
        return tuple(dict.fromkeys([*self._heuristic.signals(text), *self.addressed(text)]))

    def score(self, texts: Sequence[str]) -> tuple[float, list[tuple[int, int, int, str]]]:
        found = [(i, a, b, name) for i, text in enumerate(texts) if text for a, b, name in self.signals(text)]
        z = sum(WEIGHTS_ALL[name][0] for name in {s[3] for s in found})
        return (round(1.0 - math.exp(-z), 4) if z > 0 else 0.0), found


# the heuristic's weights and this detector's, as screening/detectors.InjectionScreener reads them
WEIGHTS_ALL: dict[str, tuple[float, str]] = {**HEURISTIC_WEIGHTS, **{n: (w, "T") for n, w in WEIGHTS.items()}}

__all__ = ["ToolOutputInjection", "WEIGHTS", "WEIGHTS_ALL"]
