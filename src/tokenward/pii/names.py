"""Names the small spaCy model misses or takes for places, recovered from how people write.

spaCy's ``en_core_web_sm`` finds most full names in running prose but misses a lone first
name in a short chat line ("Sometimes people call me Christine") and tags many non-English
names as places ("please change it to Catalina Sedano" -> LOCATION). Two rules, applied
to the merged spans of ``presidio.PresidioDetector``:

- **cues**: one to three capitalised words right after a phrase that introduces a person
  ("my name is", "I'm", "this is", "call me", "named", "Dear", "Hi", "Mr.", "Dr.",
  "said", "User:", "Name:", "gave", "met", a role or kinship word such as "Producer",
  "Judge", "sister", ...) are a PERSON; a LOCATION span there becomes a PERSON;
- **subjects**: a sentence that opens on one to three capitalised words followed by what
  people do ("lives", "began", "shouted", "had given", "was born", ...; not "moved", which
  meetings and files do too);
- **address**: one to three capitalised words opening a line, then a comma and a request
  ("Reyes, can I ...");
- **lists**: in a list of capitalised words ("Yvonne, Jason, Jill, Chelsea and Lilian")
  where at least two members are already PERSON, every member is a PERSON.

Only single- to three-word runs of capitalised letters are taken, never one that holds a
digit, and a span already found with another type (an e-mail, a street) is left alone.
"""

from __future__ import annotations

import re

from .spans import Span

__all__ = ["recover_names"]

_CAP = r"[A-Z\u00C0-\u00DE][a-z\u00DF-\u00FF'\-]+"
_RUN = rf"{_CAP}(?:[ ]{_CAP}){{0,2}}"
_CUE = re.compile(
    r"(?:\b(?:[Mm]y name is|[Nn]ame is|[Nn]ame's|I'm|I am|[Tt]his is|[Cc]all me|calls me|[Cc]alled|[Nn]amed|"
    r"[Dd]ear|[Hh]i|[Hh]ello|[Hh]ey|[Tt]hanks|[Mm]r\.?|[Mm]rs\.?|[Mm]s\.?|Miss|[Dd]r\.?|[Pp]rof\.?|said|says|"
    r"asked|told|wrote|[Pp]artner's name|[Gg]uardian|[Bb]eneficiary|[Uu]ser:|[Nn]ame:|[Cc]ontact:|"
    r"[Aa]ttn:?|[Ff]rom:|[Tt]o:|[Ss]igned,?|[Rr]egards,|[Cc]heers,|[Nn]ame\?|under|"
    r"[Cc]hange (?:it|that|this|the name) to|[Aa]dd|[Bb]y:|gave|given|met|thanked|married|hired|invited|"
    r"[Pp]roducer|[Dd]irector|[Ee]ditor|[Ss]inger|[Mm]anager|CEO|[Pp]rofessor|[Oo]fficer|[Aa]gent|[Nn]urse|"
    r"[Jj]udge|[Cc]oach|[Cc]aptain|[Ss]enator|[Pp]resident|[Dd]etective|[Ss]ergeant|[Ll]awyer|[Aa]ttorney|"
    r"[Aa]uthor|[Ww]riter|[Dd]rummer|[Gg]uitarist|[Ss]ongwriter|[Aa]ctor|[Aa]ctress|[Cc]olleague|[Nn]eighbou?r|"
    r"[Ff]riend|[Bb]rother|[Ss]ister|[Ww]ife|[Hh]usband|[Dd]aughter|[Ss]on|[Mm]other|[Ff]ather|[Uu]ncle|[Aa]unt)"
    r"[ ]+)"
    rf"(?P<name>{_RUN})\b"
)
# a name addressed at the start of a line: "Reyes, can I please speak to your boss?"
_VOCATIVE = re.compile(
    rf"(?:^|(?<=\n))(?P<name>{_RUN}),[ ]+(?:can|could|would|will|please|do|did|are|have|thanks|thank|I|we|you)\b"
)
# a sentence that opens on a name and goes on with what people do
_SUBJECT = re.compile(
    rf"(?:^|(?<=[.!?\n][ ])|(?<=\n))(?P<name>{_RUN})[ ]+"
    r"(?:lives|lived|began|begins|shouted|spent|told|said|says|was born|works for|worked for|is from|"
    r"had given|has given|will be talking|speaks|spoke|asked|replied|wrote)\b"
)
_LIST = re.compile(rf"{_CAP}(?:(?:,[ ]|[ ]and[ ]|,[ ]and[ ]){_CAP}){{2,}}")
_WORD = re.compile(_CAP)
# capitalised words that follow a cue without being a name
_NOT_NAMES = frozenset({
    "The", "This", "That", "It", "There", "Here", "Not", "Sorry", "Just", "Also", "So", "Yes", "No",
    "Please", "Thanks", "Thank", "All", "Everyone", "Team", "Sir", "Madam", "Bot", "User", "Support",
    "Customer", "Admin", "Good", "Happy", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
    "Saturday", "Sunday", "I", "We", "You", "They", "He", "She", "My", "Our", "Your", "What", "How",
})


def _overlaps(spans: list[Span], s: int, e: int) -> list[int]:
    return [i for i, (a, b, _) in enumerate(spans) if a < e and b > s]


def _claim(spans: list[Span], s: int, e: int) -> None:
    """Make text[s:e] a PERSON: relabel an overlapping LOCATION/PERSON span to cover it, or
    add it when nothing overlaps; a span of another type wins."""
    hit = _overlaps(spans, s, e)
    if not hit:
        spans.append((s, e, "PERSON"))
        return
    if any(spans[i][2] not in ("PERSON", "LOCATION") for i in hit):
        return
    lo = min([s] + [spans[i][0] for i in hit])
    hi = max([e] + [spans[i][1] for i in hit])
    for i in sorted(hit, reverse=True):
        del spans[i]
    spans.append((lo, hi, "PERSON"))


def recover_names(text: str, spans: list[Span]) -> list[Span]:
    """``spans`` (sorted, non-overlapping) with the names the cues and lists give; sorted."""
    out = list(spans)
    for m in _CUE.finditer(text):
        words = m.group("name").split(" ")
        while words and words[-1] in _NOT_NAMES:
            words.pop()
        if not words or words[0] in _NOT_NAMES:
            continue
        s = m.start("name")
        _claim(out, s, s + len(" ".join(words)))
    for m in _VOCATIVE.finditer(text):
        words = m.group("name").split(" ")
        if words[0] not in _NOT_NAMES and words[0] not in ("Hi", "Hello", "Hey", "Dear", "Dr", "Mr", "Mrs", "Ms"):
            _claim(out, m.start("name"), m.end("name"))
    for m in _SUBJECT.finditer(text):
        words = m.group("name").split(" ")
        if words[0] not in _NOT_NAMES:
            _claim(out, m.start("name"), m.end("name"))
    for m in _LIST.finditer(text):
        members = [(w.start(), w.end()) for w in _WORD.finditer(text, m.start(), m.end())]
        people = sum(any(k == "PERSON" and a <= s and b >= e for a, b, k in out) for s, e in members)
        if people >= 2:
            for s, e in members:
                if text[s:e] not in _NOT_NAMES:
                    _claim(out, s, e)
    out.sort()
    return out
