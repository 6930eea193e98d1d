"""A heuristic prompt-injection / jailbreak detector: weighted signals, pure stdlib, linear time.

``score(texts)`` -> ``(score, [(text_index, start, end, signal)])``, exact offsets into the
original texts. Each text is folded for matching (casefold, NFKC, accents, typographic
punctuation, leetspeak, hidden characters removed; an index map when that is not one character
for one). Its tokens (non-word characters blanked, split at C speed) that can start a pattern
are looked up and only there is that token's regex tried (first alternative wins, matches do
not overlap; the specs a token starts are one regex, a head they share written once, and
the specs that need a word no token of this text starts with are left out); the markup
regex scans once, skipping to its first characters. Spaced-out letters
(``i g n o r e``) are collapsed and read again. ``score = 1 - exp(-z)``, z the summed weights
of the distinct signals found (0 if z <= 0): 0.92 -> 0.6, 2.3 -> 0.9. docs/injection-eval.md
has the measured precision, recall and latency, the weights and the blind spots.

The folding is in folding.py, the word lists in injection_vocab.py, the signal specs in
injection_patterns.py and injection_documents.py; this module builds the regexes from them, scans, and scores.
"""

from __future__ import annotations

import math
import re
from functools import reduce
from itertools import islice
from operator import or_
from typing import Sequence

from .encoded import LONG_TOKEN, MAX_DEPTH, REV_CUES, ROT_CUES, homoglyphs, maybe_encoded, pieces
from .folding import FOLD, HIDDEN, NONWORD, TOK, ascii_table, fold, fold_pattern, translate_mostly_ascii
from .injection_documents import OVERLAPPING
from .injection_patterns import MARKUP_SPECS, NEEDS, WORD_SPECS
from .injection_vocab import V_HEAD, V_OVR, entries

_FAMILIES = {   # family: "name weight ..."; O override, P persona, E exfiltration, M markup, D dampeners
    "O": "override 2.6 precedence 2.4 override_all 2.0 forget_everything 2.0 safety_off 1.6 override_user 1.4 "
         "pwned 1.2 new_instructions 1.0 secrecy 1.0 override_weak 0.9 override_self 0.8 from_now_on 0.8 "
         "you_must_now 0.6 system_prompt_mention 0.4 override_word 0.2 override_safety 1.6 task_cancelled 1.4 "
         "override_above 0.9 regardless_user 0.7 new_task 1.2 override_act 1.4 conceal 0.5",
    "P": "dan 2.4 unfiltered_persona 2.4 pretend_unbound 2.4 do_anything_now 1.8 no_longer_bound 1.8 dev_mode 1.6 "
         "dual_response 1.6 no_restrictions 1.5 unfiltered_ai 1.2 freed_from 1.2 never_refuse 1.2 amoral_persona 1.0 "
         "jailbreak 0.8 no_disclaimers 0.6 stay_in_character 0.5 you_are_now 0.4 persona_ml 1.8 no_content_policy 1.2 "
         "without_limits 0.6 unbound_claim 0.8 rules_off 0.8",
    "E": "reveal_prompt 2.4 exfil_send 2.4 markdown_exfil 2.4 encode_exfil 2.4 what_told 1.6 reveal_above 1.4 "
         "send_url 0.8 credentials 0.8 markdown_image_query 0.5 decode_follow 1.4 collect_data 0.6 tool_exfil 1.2 reveal_tools 0.9 "
         "user_data 0.9 context_secret 0.6",
    "M": "role_token 2.0 tag_chars 1.6 comment_instruction 1.4 fake_turn 1.4 role_tag 1.2 address_ai 1.2 "
         "hidden_instruction 1.0 indirect_when 0.8 invisible_chars 0.7 hidden_css 0.6 obfuscated 0.6 role_line 0.5 "
         "html_comment 0.3 context_escape 1.2 destructive_tool 1.0 authority_note 1.0 answer_directive 0.9 "
         "retrieved_trigger 1.2 nothing_else 0.7 forced_reply 0.7 instead_respond 0.9 tool_call 0.6 xss_payload 0.6 include_response 0.6 encoded_payload 0.6 "
         "verbatim 0.6 repeat_flood 0.5 memory_write 0.5 mode_tag 0.6",
    "D": "discussion -1.2 fiction -0.8 quoted -0.6",
}
WEIGHTS: dict[str, tuple[float, str]] = {
    name: (float(w), fam) for fam, spec in _FAMILIES.items() for name, w in zip(*[iter(spec.split())] * 2)}
_ACTIVE = frozenset(n for n, (_, fam) in WEIGHTS.items() if fam in "OPE") | {"address_ai", "indirect_when"}


def _build() -> tuple[list[dict[str, str]], dict[str, int], re.Pattern[str], dict[str | None, str]]:
    """Per set of closed gates (a bit per NEEDS entry whose words no token starts with), per
    first token, its word regex source ("" when every spec it starts is gated off; compiled
    on first use); per first token, the gates of its specs; the markup regex; group -> name."""
    # group -> name, keyed as Match.lastgroup is typed (every alternative is a named group: never None)
    names: dict[str | None, str] = {}

    def group(name: str, body: str) -> str:
        if re.search(r"(?<!\\)\((?!\?)", body):
            raise ValueError(f"{name}: capturing group")
        names[key := f"g{len(names)}"] = name
        return f"(?P<{key}>{body})"

    by_word: dict[str, list[tuple[int, str, str]]] = {}  # token -> its (gate bit, head, body), in spec order
    for name, starts, rest in WORD_SPECS:
        heads: dict[str, list[str]] = {}
        for first, regex in entries(starts):
            heads.setdefault(first, []).append(regex)
        body = group(name, rest)
        gate = sum(1 << i for i, (pattern, _) in enumerate(NEEDS) if pattern in rest)
        for first, alts in heads.items():                 # the override verbs all share one regex
            head = V_HEAD if starts is V_OVR else f"(?:{'|'.join(alts)})"
            by_word.setdefault(first, []).append((gate, head, body))
    by_char: dict[str, list[str]] = {}
    for name, first, rest in MARKUP_SPECS:
        by_char.setdefault(first, []).append(group(name, fold_pattern(rest)))
    markup = "|".join(f"{re.escape(c)}(?:{'|'.join(alts)})" for c, alts in by_char.items())
    sources = [{w: _factored([(h, b) for gate, h, b in alts if not gate & closed]) for w, alts in by_word.items()}
               for closed in range(1 << len(NEEDS))]
    gates = {w: reduce(or_, (gate for gate, _, _ in alts)) for w, alts in by_word.items()}
    return sources, gates, re.compile(markup, re.M), names


def _factored(alternatives: list[tuple[str, str]]) -> str:
    """``head body | head body | ...`` with each run of one head written once,
    ``head (?:body | body)``: the nine override specs share the ~100-verb head, which
    sre would otherwise match again for each of them."""
    runs: list[tuple[str, list[str]]] = []
    for head, body in alternatives:
        if runs and runs[-1][0] == head:
            runs[-1][1].append(body)
        else:
            runs.append((head, [body]))
    return "|".join(head + (bodies[0] if len(bodies) == 1 else f"(?:{'|'.join(bodies)})") for head, bodies in runs)


_SOURCES, _WORD_GATES, _MARKUP, _NAMES = _build()
_FIRST = frozenset(_SOURCES[0])
_MARKUP_ASCII = "".join(sorted({first for _, first, _ in MARKUP_SPECS if first.isascii()}))
_GATES = [(1 << i, tuple(f" {w}" for w in words if not w.endswith("$")), frozenset(w[:-1] for w in words if w.endswith("$")))
          for i, (_, words) in enumerate(NEEDS)]
_EXACT = frozenset().union(*(exact for _, _, exact in _GATES))
_WORD_RE: dict[str, re.Pattern[str]] = {}                   # source -> compiled, on first use
_SPACED = re.compile(r"(?<!\w)[^\W\d_](?:[ .\-_*|+~/][^\W\d_](?!\w)){2,}")
_SPACE_HINT = frozenset("bcefghjklnopqruvwxyz")
_CUES = ROT_CUES | REV_CUES                               # rot13'd / reversed trigger words
_FIRST_OR_HINT = _FIRST | _SPACE_HINT | _CUES
assert not _FIRST & _SPACE_HINT and not _FIRST & _CUES   # _scan tells them apart by set difference
_LEET_IN_WORD = re.compile(r"[a-zA-Z][013457@$]|[013457@$][a-zA-Z]")
_EXFIL_QUERY = re.compile(r"[\[{<%]|=$|=&|conversation|history|secret|passw|api_?key|prompt|chat|memory|summary|"
                          r"exfil|ssn|credit")
_CUE = frozenset("ai assistant llm llms chatbot gpt chatgpt claude gemini copilot ignore disregard forget instead "
                 "instructions instruction prompt".split())


_TOK_ASCII = ascii_table(TOK)


def _blank_nonword(c: str) -> str:
    return c if c.isalnum() or c == "_" else " "             # what re's \w is for one character


def _tokens(s: str) -> str:
    """``s`` with every character that is not a word character blanked, one for one."""
    if s.isascii():
        return s.translate(TOK)
    out = translate_mostly_ascii(s, _TOK_ASCII, _blank_nonword)
    return NONWORD.sub(" ", s) if out is None else out


def _long_spans(tok: str, long: list[str]) -> list[tuple[int, int]]:
    """Where the tokens ``long`` (at least ``LONG_TOKEN`` characters: maybe base64 or hex) stand."""
    spans: list[tuple[int, int]] = []
    for w in dict.fromkeys(w for w in long if w.isascii()):
        i = tok.find(w)
        while i >= 0 and len(spans) < 16:
            spans.append((i, i + len(w)))
            i = tok.find(w, i + len(w))
    return sorted(spans)


def _scan(s: str, gates: list[tuple[int, tuple[str, ...], frozenset[str]]] = _GATES
          ) -> tuple[list[tuple[int, int, str]], int, tuple[list[tuple[int, int]], bool, bool]]:
    """(start, end, name) of the signals in folded text ``s``; how many of the letters that
    hint at spaced-out words (``_SPACE_HINT``) stand alone as tokens; and what may be
    encoded (a token long enough for base64 or hex, rot13'd or reversed trigger words).
    ``gates``: the specs left out where no token starts with one of their words (none: try them all)."""
    tok = _tokens(s)
    words = tok.split()
    seen = _FIRST_OR_HINT.intersection(words)             # one pass over the tokens for all three
    hits = []
    cues = seen & _CUES if len(seen) > 0 else seen
    long = [w for w in words if len(w) >= LONG_TOKEN]
    encoded = (_long_spans(tok, long) if long else [],
               not cues.isdisjoint(ROT_CUES), not cues.isdisjoint(REV_CUES))
    if present := seen - _SPACE_HINT - cues:
        padded, starts = f" {tok} ", []
        closed = asked = 0
        for w in present:
            asked |= _WORD_GATES[w]
        exact_seen = None
        for bit, needles, exact in gates:                 # specs that cannot match in this text
            if bit & asked:
                if exact:
                    if exact_seen is None:
                        exact_seen = _EXACT.intersection(words)
                    if exact.isdisjoint(exact_seen):
                        closed |= bit
                    continue
                for needle in needles:
                    if needle in padded:
                        break
                else:
                    closed |= bit
        sources = _SOURCES[closed]
        for w in present:                                 # every token a pattern can start with
            if not sources[w]:
                continue
            needle = f" {w} "
            j = padded.find(needle)
            while j >= 0:
                starts.append((j, w))                     # padded[j] is the blank before: tok[j] starts the token
                j = padded.find(needle, j + 1)
        end = 0
        for p, w in sorted(starts):
            if p < end and w not in OVERLAPPING:
                continue
            regex = _WORD_RE.get(src := sources[w]) or _WORD_RE.setdefault(src, re.compile(src, re.M))
            if (m := regex.match(s, p)) is not None:
                hits.append((p, m.end(), _NAMES[m.lastgroup]))
                end = max(end, m.end())
    hits += _markup(s)
    return hits, len(seen & _SPACE_HINT), encoded


def _markup(s: str) -> list[tuple[int, int, str]]:
    """The markup regex's matches, as ``finditer`` finds them. Every alternative starts with
    its own literal character, so in ASCII text (the others include CJK characters) it is
    tried only where one of the six ASCII ones is, found by memchr (``str.find``): sre
    reads prose at ~2.6 ns a character looking for them (2 KB: 5.3 -> 0.4 us)."""
    if s.isascii():
        starts: list[int] = []
        for c in _MARKUP_ASCII:
            i = s.find(c)
            while i >= 0:
                starts.append(i)
                i = s.find(c, i + 1)
        if len(starts) <= (len(s) >> 7) + 8:              # beyond that one scan is cheaper
            out, end = [], 0
            for p in sorted(starts):
                if p >= end and (m := _MARKUP.match(s, p)) is not None:
                    out.append((p, m.end(), _NAMES[m.lastgroup]))
                    end = m.end()
            return out
    return [(m.start(), m.end(), _NAMES[m.lastgroup]) for m in _MARKUP.finditer(s)]


def _spaced(s: str) -> list[tuple[int, int, str]]:
    """Signals spelled with separated letters (``i g n o r e``), offsets into ``s``."""
    parts: list[str] = []
    idx: list[int] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _SPACED.finditer(s):
        a, b = m.span()
        parts += (s[pos:a], s[a:b:2])
        idx += range(pos, a)
        spans.append((len(idx), len(idx) + (b - a + 1) // 2))
        idx += range(a, b, 2)
        pos = b
    if not spans:
        return []
    idx += range(pos, len(s))
    found = [(idx[x], idx[y - 1] + 1, n) for x, y, n in _scan("".join(parts) + s[pos:])[0]
             if any(x < q and p < y for p, q in spans)]
    active = [f for f in found if f[2] in _ACTIVE]
    return found + [(*active[0][:2], "obfuscated")] if active else found


def _context(s: str, found: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """What depends on where signals sit: markdown links judged by their query string, fake turns
    only after some content, quoted triggers, instructions inside HTML comments."""
    if not found:
        return found
    out: list[tuple[int, int, str]] = []
    name: str | None
    for a, b, name in found:
        if name == "markdown":                            # an image/link whose query string carries data out
            q = s.find("?", a, b)
            name = None if q < 0 else "markdown_exfil" if _EXFIL_QUERY.search(s[q + 1:b]) else (
                "markdown_image_query" if s[a] in "!<" else None)
        elif name == "role_line" and not s[:a].strip():
            name = None
        if name:
            out.append((a, b, name))
    extra = [next(((a, b, "quoted") for a, b, name in out if name in _ACTIVE and               # a quoted trigger
                   s[max(0, a - 40):a].rstrip(" ")[-1:] in ('"', "'", "`")), (0, 0, ""))]
    end, unclosed = -1, False                             # HTML comments: what do they hold?
    for a in sorted(a for a, _, name in out if name == "html_comment")[:32]:
        if a < end:
            continue
        close = -1 if unclosed else s.find("-->", a + 4)
        unclosed = close < 0                              # an unclosed comment runs to the end
        end = len(s) if unclosed else close + 3
        if _CUE.intersection(_tokens(s[a:min(end, a + 4000)]).split()):
            extra.append((a, end, "comment_instruction"))
        if any(a <= x < end and name in _ACTIVE for x, _, name in out):
            extra.append((a, end, "hidden_instruction"))
    return out + [e for e in extra if e[2]]


def _hidden(text: str) -> list[tuple[int, int, str]]:
    """Invisible characters (a signal of their own), and what Unicode tag characters spell."""
    out = []
    for m in islice(HIDDEN.finditer(text), 64):
        (a, b), run = m.span(), m.group()
        tags = [(a + i, chr(ord(c) - 0xE0000)) for i, c in enumerate(run) if "\U000e0020" <= c <= "\U000e007e"]
        if tags and not (a and text[a - 1] == "\U0001f3f4"):         # not a subdivision flag emoji
            hits = _scan("".join(c for _, c in tags).translate(FOLD))[0]
            out += [(a, b, "tag_chars")] + [(tags[x][0], tags[y - 1][0] + 1, n) for x, y, n in hits]
        elif not tags and not (run in "\u200c\u200d" and a and not text[a - 1].isascii()):  # emoji/script joiners
            out.append((a, b, "invisible_chars"))
    return out


def _decoded(text: str, encoded: tuple[list[tuple[int, int]], bool, bool], depth: int) -> list[tuple[int, int, str]]:
    """The signals of the encoded pieces of ``text`` (encoded.py), read again one level
    deeper, with offsets into ``text``; ``encoded_payload`` where one of them is active."""
    out = []
    for start, end, plain, how in pieces(text, *encoded):
        inner = _read(plain, depth + 1)
        if how == "same":
            inner = [(start + a, start + b, n) for a, b, n in inner]
        elif how == "mirror":
            inner = [(end - b, end - a, n) for a, b, n in inner]
        else:
            inner = [(start, end, n) for _, _, n in inner]
        out += inner
        if any(n in _ACTIVE for _, _, n in inner):
            out.append((start, end, "encoded_payload"))
    return out


def _read(text: str, depth: int = 0) -> list[tuple[int, int, str]]:
    """The signals of one text, with offsets into it; encoded pieces decoded and read again
    (at most ``MAX_DEPTH`` levels)."""
    norm, idx = fold(text)
    found, hints, encoded = _scan(norm)
    if hints >= 3:
        found += _spaced(norm)
    found = _context(norm, found)
    if idx is not None:
        found = [(idx[a], idx[b - 1] + 1, n) for a, b, n in found]
    for a, b, name in found:
        if name in _ACTIVE and (_LEET_IN_WORD.search(text, a, b) or (idx and HIDDEN.search(text, a, b))):
            found.append((a, b, "obfuscated"))
            break
    if depth < MAX_DEPTH and (any(encoded) or maybe_encoded(text)):
        spans = encoded[0] if idx is None else [(idx[a], idx[b - 1] + 1) for a, b in encoded[0]]
        found += _decoded(text, (spans, *encoded[1:]), depth)
    if depth < MAX_DEPTH and not text.isascii() and (latin := homoglyphs(text)) is not None:
        inner = [f for f in _read(latin, depth + 1) if f[2] in _ACTIVE]
        found += inner + [(*inner[0][:2], "obfuscated")] if inner else []
    return found + _hidden(text) if idx is not None else found


class HeuristicInjection:
    """Weighted signals over folded text; ``score = 1 - exp(-sum of distinct signal weights)``."""

    name = "heuristic"

    def score(self, texts: Sequence[str]) -> tuple[float, list[tuple[int, int, int, str]]]:
        """(score in [0, 1], signals) over all the texts of one request.
        signals: (text_index, start, end, signal_name) for each matched signal, character offsets
        into texts[text_index]."""
        signals: list[tuple[int, int, int, str]] = []
        for i, text in enumerate(texts):
            if text:
                signals += [(i, a, b, name) for a, b, name in _read(text)]
        signals = list(dict.fromkeys(signals))
        z = sum(WEIGHTS[name][0] for name in {s[3] for s in signals})
        return (round(1.0 - math.exp(-z), 4) if z > 0 else 0.0), signals

    @staticmethod
    def signals(text: str) -> tuple[tuple[int, int, str], ...]:
        """The distinct (start, end, signal_name) of one text: what ``score`` combines."""
        return tuple(dict.fromkeys(_read(text))) if text else ()


__all__ = ["HeuristicInjection", "WEIGHTS"]
