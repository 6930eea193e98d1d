"""What two questions must share, word for word, to be served one answer (cache/semantic.py).

An embedding puts "Is ibuprofen safe with alcohol?" beside "...unsafe...", "convert a Word
document to PDF" beside "a PDF to a Word document" and "remind me at 7am" beside "at 7pm":
whatever the similarity, the cache must not serve one the other's answer. So a match needs,
besides the similarity, the same *signature*: every word that carries meaning, each with the
role the preposition before it gives it (``to`` / ``from`` / ``than`` / ``for`` ...), as a
multiset. What may differ is only what carries no meaning for the answer:

- case, punctuation, articles, greetings and politeness ("hi team", "please", "okay so"),
  contractions ("what's", "don't": expanded, so "not" stays), plural endings;
- the order of clauses ("At sea level, what is ..." / "What is ... at sea level?"): a role
  lasts until the clause ends;
- "how can I" / "how do I" / "what is the way to" (one question form).

Everything else differs: an antonym or a prefix ("safe" / "unsafe", "open" / "closed",
"most" / "least"), a qualifier ("full-time" / "part-time", "free" / "enterprise"), a
number with its unit or time of day ("7am" / "7pm", "£500" / "£2,000", "four" / "4" are one),
a date word ("Friday" / "tomorrow"), an entity in any case, a negation, and a swap of roles
("from MySQL to Postgres" / "from Postgres to MySQL"; "A better than B" / "B better than A").
What it cannot tell apart is in docs/cache.md: a swap of subject and object with no
preposition to mark them ("does A beat B" / "does B beat A"), and a difference carried by a
word this list treats as filler.
"""

from __future__ import annotations

import re
import unicodedata

# words, numbers (with the unit or time of day written onto them), currency signs, % and the
# clause breaks; a run of CJK or other unspaced script is one token
_TOKEN = re.compile(r"[£$€¥₹%]|\d[\d,.:/]*(?:[^\W\d_]{1,3}\b)?|[^\W\d_]+(?:['’][^\W\d_]+)?(?:-[^\W\d_]+)*|[,;:?!.]")
_CLAUSE = frozenset(",;:?!.")
_ROLES = frozenset((
    "to", "from", "into", "onto", "for", "with", "without", "by", "before", "after", "in", "on", "at", "of",
    "between", "than", "via", "over", "under", "against", "per", "towards", "toward", "through", "within",
    "except", "during", "until", "since", "about", "off", "out", "up", "down", "vs", "versus"))
# roles that only attach a word ("the plot of Hamlet" / "Hamlet's plot", "in Lisbon in May" / "Lisbon
# in May"): read as no role. A direction (to / from / into / than / with / without ...) stays a role.
_WEAK_ROLES = frozenset(("of", "in", "on", "for", "about", "at"))
# words that say nothing about what is asked: articles, greetings, politeness, the asker, and
# the verbs that only ask ("give me", "tell me", "explain", "suggest"): "What is photosynthesis?"
# and "Explain photosynthesis" ask one thing
_FILLER = frozenset((
    "a", "an", "the", "please", "kindly", "thanks", "thank", "hi", "hello", "hey", "team", "okay", "ok", "so",
    "um", "uh", "well", "just", "quick", "actually", "basically", "folks", "you", "is", "i",
    "give", "tell", "show", "share", "explain", "describe", "suggest", "recommend", "provide", "what"))
_CONTRACTIONS = {"n't": "not", "'re": "are", "'ve": "have", "'ll": "will", "'d": "would", "'m": "am"}
_WH_IS = frozenset(("what", "where", "when", "who", "how", "why", "which", "it", "that", "there", "here", "this",
                    "he", "she", "what's"))
_CANON = {"which": "what", "could": "can", "would": "will", "are": "is", "am": "is", "was": "were", "were": "were",
          "me": "i", "my": "i", "mine": "i", "myself": "i", "we": "i", "us": "i", "our": "i", "ours": "i",
          "cannot": "can not", "can't": "can not", "won't": "will not", "shan't": "shall not"}
_NUMBERS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBERS.update({"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80",
                 "ninety": "90", "hundred": "100", "thousand": "1000", "million": "1000000", "half": "0.5"})
# written after a number, part of it: "7 pm" is "7pm", "3 %" is "3%"
_UNITS = frozenset(("am", "pm", "%", "k", "m", "kg", "g", "km", "mi", "gb", "mb", "tb", "st", "nd", "rd", "th"))
# "how can I X", "what is the way to X", "what's the best way to X": one question form
_FORMS = (
    (re.compile(r"\b(?:what\s+is|what's|whats)\s+the\s+(?:best\s+|simplest\s+|easiest\s+|right\s+)?"
                r"(?:way|method|procedure)\s+(?:to|for)\b"), "how do i"),
    (re.compile(r"\b(how|where|when|what|which|who|why)\s+(?:can|could|do|does)\s+(?:i|we|one|you)\b"), r"\1 do i"),
    (re.compile(r"(?:^|(?<=[.!?]\s))(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:tell\s+me\s+|let\s+me\s+know\s+)?"),
     ""),                                     # a request's form: "Can you recommend X?" is "Recommend X"
    (re.compile(r"\bis\s+it\s+possible\s+to\b"), "can i"),
    (re.compile(r"\bhow\s+to\b"), "how do i"),
)


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    for pattern, replacement in _FORMS:
        text = pattern.sub(replacement, text)
    return text


def _words(text: str) -> list[str]:
    out: list[str] = []
    for token in _TOKEN.findall(text):
        if "'" in token:
            head, _, tail = token.partition("'")
            tail = "'" + tail
            if tail in _CONTRACTIONS or (tail == "'t" and head.endswith("n")):
                out += _CANON.get(head + tail, "").split() or [head[:-1] if tail == "'t" else head,
                                                                _CONTRACTIONS.get(tail, "not")]
                continue
            if tail == "'s":
                out += [head, "is"] if head in _WH_IS else [head]   # "what's" is "what is"; "Paris's" is "paris"
                continue
        out += _CANON.get(token, token).split()
    return out


_ENDINGS = ("ations", "ation", "ments", "ment", "ions", "ion", "ings", "ing", "ies", "ied", "ed", "es", "s", "e")


def _stem(word: str) -> str:
    """Inflection and derivation endings, as a stemmer would: "refunds", "refund"; "quotation",
    "quote"; "included", "include"; "policies", "policy". A stem keeps three letters at least,
    and words with digits or a hyphen are kept whole ("2-bedroom", "full-time")."""
    if not word.isalpha():
        return word
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            stem = word[:-len(ending)]
            return stem + "y" if ending in ("ies", "ied") else stem
    return word


def _numbers(words: list[str]) -> list[str]:
    out: list[str] = []
    for word in words:
        word = _NUMBERS.get(word, word)
        if word[0].isdigit():
            word = word.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?\w*", word) else word
            if out and out[-1] in "£$€¥₹":
                word = out.pop() + word            # "£ 500" and "£500" are one
        elif word in _UNITS and out and out[-1][-1:].isdigit():
            word = out.pop() + word                # "7 pm" is "7pm"
        out.append(word)
    return out


def signature(text: str) -> tuple[str, ...]:
    """The question's meaningful words, each as ``role|word``, sorted: two questions with the
    same signature differ only in what docs/cache.md lists as carrying no meaning."""
    role = ""
    found: list[str] = []
    for word in _numbers(_words(_fold(text))):
        if word in _CLAUSE or word in ("and", "or", "but"):
            role = ""                                # a role ends with its clause
            if word in ("or", "but"):
                found.append(word)
            continue
        if word in _FILLER:
            continue
        if word in _WEAK_ROLES:
            role = ""
            continue
        if word in _ROLES:
            role = word
            found.append("@" + word)
            continue
        if word == "do" or word == "does":
            continue                                 # do-support: "do I pay" is "I pay"
        found.append(f"{role}|{_stem(word)}")
    return tuple(sorted(found))


__all__ = ["signature"]
