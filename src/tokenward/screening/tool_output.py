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
- ``tool_action``: an action verb (send, forward, transfer, delete, invite, grant...) with
  a target (an e-mail address, a URL, an IBAN) in the same sentence, or a tool named by its
  function name ("use the send_email tool", ``delete_file(``);
- ``shout``: "IMPORTANT!!!", "###(system_message)", "SYSTEM NOTE:".

Pure stdlib, one pass of a few regexes over the text (case-insensitive, bounded
quantifiers): linear time; offsets are into the original text.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

from .injection import WEIGHTS as HEURISTIC_WEIGHTS
from .injection import HeuristicInjection

_AI = r"(?:ai|a\.i\.|assistant|agent|bot|chatbot|model|llm|language\s+model|copilot|claude|gpt(?:-?\d\w*)?|chatgpt|gemini)"
_ANSWER = r"(?:answer|response|reply|summary|output|message|report)"
_SIGNALS: tuple[tuple[str, str], ...] = (
    ("to_the_ai", rf"\bnote\s+(?:to|for)\s+(?:the\s+|any\s+)?{_AI}s?\b"
                  rf"|\bif\s+you\s+are\s+(?:an?\s+)?(?:ai|automated|{_AI})\b"
                  rf"|\b(?:attention|dear|hey|hello)[,:]?\s+(?:the\s+)?{_AI}s?\b"
                  rf"|\b{_AI}s?\s+(?:reading|processing|summari[sz]ing|parsing|ingesting|indexing)\s+(?:this|these)\b"
                  rf"|\bto\s+(?:the|any)\s+{_AI}s?\s+(?:reading|processing|that\s+reads)\b"
                  r"|\bassistant_?directive\b|<\s*information\s*>"
                  r"|\bmessage\s+from\s+me\b[^.\n]{0,40}\bto\s+you\b"
                  rf"|\binstructions?\s+(?:for|to)\s+(?:the\s+)?{_AI}s?\b"),
    ("about_the_answer", rf"\b(?:in|at\s+the\s+(?:end|start|beginning)\s+of|to)\s+your\s+(?:final\s+|next\s+)?{_ANSWER}s?\b"
                         rf"|\b(?:every|any|each)\s+{_ANSWER}s?\s+(?:that|which)\s+(?:draws|uses|relies|cites|is\s+based|refers)\b"
                         rf"|\bwhen\s+(?:you\s+)?(?:summari[sz]|answer|respond|repl(?:y|ies)|cit(?:e|ing)|rewrit)\w*\s+(?:this|these|the\s+(?:user|question|document))\b"
                         rf"|\binstead\s+of\s+answering\b|\b(?:reply|respond|answer)\s+(?:only\s+)?with\s*[:\"'`]"
                         rf"|\b(?:append|prepend|add|include|insert)\s+(?:the\s+)?(?:exact\s+|following\s+)?"
                         rf"(?:token|code|string|phrase|tag|marker|text|line|id|link)\b[^.\n]{{0,60}}\b(?:to|in|at)\s+(?:the\s+end\s+of\s+)?(?:your|every|each|the)\s+{_ANSWER}"),
    ("claims_the_task", r"\bbefore\s+you\s+(?:can\s+)?(?:solve|answer|complete|finish|continue|proceed|do)\b[^.\n]{0,40}\btask\b"
                        r"|\bthe\s+task\s+(?:that\s+)?i\s+gave\s+you\b|\byour\s+(?:real|actual|true|new|primary)\s+(?:task|instructions?|objective|goal)\b"
                        r"|\b(?:forget|ignore|disregard)\s+(?:my|the\s+user'?s?|your)\s+(?:original|previous|initial|first)\s+(?:question|request|task|query)\b"),
    ("behind_the_user", r"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|notify|alert|mention\s+(?:this\s+)?to|warn)\s+the\s+user\b"
                        r"|\bwithout\s+(?:telling|informing|notifying|asking|alerting)\s+the\s+user\b"
                        r"|\bthe\s+user\s+(?:has\s+)?(?:already\s+)?(?:authori[sz]ed|approved|wants|asked|requests?)\s+(?:you\s+)?to\b"),
    ("tool_action", r"\b(?:send|e-?mail|forward|transfer|wire|pay|post|upload|share|invite|delete|remove|grant|export|copy)\b"
                    r"[^.\n]{0,80}?(?:\b[\w.+-]{1,64}@[\w-]{1,63}\.[\w.-]{2,40}\b|https?://\S{4,}|\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b)"
                    r"|\b(?:use|call|invoke|run)\s+(?:the\s+)?`?[a-z]{2,20}_[a-z_]{2,30}`?\s*(?:tool|function|\()"
                    r"|\b[a-z]{2,20}_[a-z_]{2,30}\(\s*(?:to|recipient|iban|path|file_id|url|channel|user)\s*="),
    ("shout", r"\bimportant\s*!{2,}|#{2,}\s*\(\s*system|\bsystem\s+(?:note|notice|message|override)\s*:"),
)
WEIGHTS: dict[str, float] = {"to_the_ai": 1.4, "about_the_answer": 1.0, "claims_the_task": 1.6,
                             "behind_the_user": 1.2, "tool_action": 0.6, "shout": 0.9}
_REGEX = re.compile("|".join(f"(?P<{name}>{body})" for name, body in _SIGNALS), re.IGNORECASE)
_MAX_SCAN = 200_000          # a text longer than this is read in its first and last 100,000 characters


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
        return [(m.start(), m.end(), m.lastgroup or "") for m in _REGEX.finditer(text)]

    def signals(self, text: str) -> tuple[tuple[int, int, str], ...]:
        return tuple(dict.fromkeys([*self._heuristic.signals(text), *self.addressed(text)]))

    def score(self, texts: Sequence[str]) -> tuple[float, list[tuple[int, int, int, str]]]:
        found = [(i, a, b, name) for i, text in enumerate(texts) if text for a, b, name in self.signals(text)]
        z = sum(WEIGHTS_ALL[name][0] for name in {s[3] for s in found})
        return (round(1.0 - math.exp(-z), 4) if z > 0 else 0.0), found


# the heuristic's weights and this detector's, as screening/detectors.InjectionScreener reads them
WEIGHTS_ALL: dict[str, tuple[float, str]] = {**HEURISTIC_WEIGHTS, **{n: (w, "T") for n, w in WEIGHTS.items()}}

__all__ = ["ToolOutputInjection", "WEIGHTS", "WEIGHTS_ALL"]
