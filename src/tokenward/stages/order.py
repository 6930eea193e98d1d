"""The stage order, declared once. Cheap checks first; ``forward`` is the runner's last step.

Each entry names a stage and the function that builds it: ``build`` of the stage's module,
``sNN_<name>.py``, numbered in the order the stages run (tests/unit/test_stage_order.py). A builder's parameters name what
it is built from (``config``, ``clock``, ``tokenizers``, ``admitter``...: the names and types
of assemble/gateway.py's ``Available``), and the assembly hands it exactly those; it may
return None when the config leaves its stage out (no screening policy, no cache). Adding a
stage means adding its module here and its builder to this tuple.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable

from . import (s01_dialect_exit, s02_edge, s03_identity, s04_model_alias, s05_dialect, s06_entitlement, s07_control,
               s08_validation, s09_work, s10_admission, s11_count_tokens, s12_screening, s13_transform, s14_cache)

if TYPE_CHECKING:
    from ..pipeline.stage import Stage

# builder(**what it names) -> the stage, or None (assemble/gateway.py calls it)
Builder = Callable[..., "Stage | None | Awaitable[Stage | None]"]

STAGES: tuple[tuple[str, Builder], ...] = (
    ("dialect_exit", s01_dialect_exit.build),   # Responses and Messages refusals in their API's terms, the edge's too
    ("edge", s02_edge.build),
    ("identity", s03_identity.build),
    ("model_alias", s04_model_alias.build),   # an alias of a model becomes that model's name (models.NAME.aliases)
    ("dialect", s05_dialect.build),     # Responses and Messages requests become their chat view
    ("entitlement", s06_entitlement.build),
    ("control", s07_control.build),     # enforcement actions and operator controls, once identity decided
    ("validation", s08_validation.build),
    ("work", s09_work.build),
    ("admission", s10_admission.build),
    ("count_tokens", s11_count_tokens.build),   # /v1/messages/count_tokens answered with work's count
    ("screening", s12_screening.build),
    ("transform", s13_transform.build),
    ("cache", s14_cache.build),
)


def replaced(name: str, builder: Builder, stages: tuple[tuple[str, Builder], ...] = STAGES
             ) -> tuple[tuple[str, Builder], ...]:
    """The same order with the stage ``name`` built by ``builder`` instead (tests, benches)."""
    if name not in {slot for slot, _ in stages}:
        raise KeyError(f"no stage named {name!r}")
    return tuple((slot, builder if slot == name else built) for slot, built in stages)


def only(names: set[str], stages: tuple[tuple[str, Builder], ...] = STAGES) -> tuple[tuple[str, Builder], ...]:
    """The same order with only the stages ``names`` (benches that price a part)."""
    unknown = names - {slot for slot, _ in stages}
    if unknown:
        raise KeyError(f"no stages named {sorted(unknown)}")
    return tuple((slot, built) for slot, built in stages if slot in names)


# Which stage writes each context slot (pipeline/context.py), for the assembly's refusal of
# an order that leaves a stage's need unwritten; the forward step needs the route.
SLOT_WRITERS: dict[str, str] = {
    "route": "edge", "principal": "identity", "entitlement": "entitlement", "request": "validation",
    "work": "work", "reservation": "admission", "job": "admission", "screening": "screening", "cache": "cache",
}
FORWARD_NEEDS = frozenset({"route"})
