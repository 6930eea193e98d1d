# Local stubs: only what tokenward calls of Presidio (the presidio extra), so that mypy gives
# one answer whether the extra is installed or not. Checked against the installed package by
# tests/unit/test_stubs.py (mypy's stubtest).
import abc
from collections.abc import Iterable

from .nlp_engine import NlpEngine

class EntityRecognizer: ...
class LocalRecognizer(abc.ABC, EntityRecognizer): ...

class PatternRecognizer(LocalRecognizer):
    def validate_result(self, pattern_text: str) -> bool | None: ...

class RecognizerResult:
    entity_type: str
    start: int
    end: int
    score: float

class RecognizerRegistry:
    def __init__(self, recognizers: Iterable[EntityRecognizer] | None = None, global_regex_flags: int | None = ...,
                 supported_languages: list[str] | None = None) -> None: ...

class AnalyzerEngine:
    def __init__(self, registry: RecognizerRegistry | None = None, nlp_engine: NlpEngine | None = None,
                 app_tracer: object = None, log_decision_process: bool = False, default_score_threshold: float = 0,
                 supported_languages: list[str] | None = None, context_aware_enhancer: object = None) -> None: ...
    def analyze(self, text: str, language: str, entities: list[str] | None = None, correlation_id: str | None = None,
                score_threshold: float | None = None, return_decision_process: bool | None = False,
                ad_hoc_recognizers: list[EntityRecognizer] | None = None, context: list[str] | None = None,
                allow_list: list[str] | None = None, allow_list_match: str | None = "exact",
                regex_flags: int | None = ..., nlp_artifacts: object = None) -> list[RecognizerResult]: ...
