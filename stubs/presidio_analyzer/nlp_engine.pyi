import abc
from collections.abc import Collection

from spacy.language import Language

class NlpEngine(abc.ABC): ...

class NerModelConfiguration:
    def __init__(self, *, labels_to_ignore: Collection[str] | None = ..., aggregation_strategy: str | None = "max",
                 stride: int | None = 14, alignment_mode: str | None = "expand", default_score: float | None = 0.85,
                 model_to_presidio_entity_mapping: dict[str, str] | None = ...,
                 low_score_entity_names: Collection[str] | None = ...,
                 low_confidence_score_multiplier: float | None = 0.4) -> None: ...

class SpacyNlpEngine(NlpEngine):
    # the loaded pipelines by language code; None until load() (tokenward hands its own in)
    nlp: dict[str, Language] | None
    def __init__(self, models: list[dict[str, str]] | None = None,
                 ner_model_configuration: NerModelConfiguration | None = None) -> None: ...
