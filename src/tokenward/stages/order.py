"""The stage order, declared once. Cheap checks first; ``forward`` is the runner's last step.

Each entry names a stage and the function that builds it. A builder's parameters name what
it is built from (``config``, ``clock``, ``tokenizers``, ``admitter``...: the names and types
of assemble/gateway.py's ``Available``), and the assembly hands it exactly those; it may
return None when the config leaves its stage out (no screening policy, no cache). Adding a
stage means adding its module here and its builder to this tuple.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable

from . import (s10_edge, s20_identity, s22_model, s25_dialect, s30_entitlement, s35_control, s40_validate,
               s50_work, s60_admit, s70_screen, s80_transform, s85_cache)

if TYPE_CHECKING:
    from ..pipeline.stage import Stage

# builder(**what it names) -> the stage, or None (assemble/gateway.py calls it)
Builder = Callable[..., "Stage | None | Awaitable[Stage | None]"]

STAGES: tuple[tuple[str, Builder], ...] = (
    ("dialect_exit", s25_dialect.build_exit),   # Responses and Messages refusals in their API's terms, the edge's too
    ("edge", s10_edge.build),
    ("identity", s20_identity.build),
    ("model_alias", s22_model.build),   # an alias of a model becomes that model's name (models.NAME.aliases)
    ("dialect", s25_dialect.build),     # Responses and Messages requests become their chat view
    ("entitlement", s30_entitlement.build),
    ("control", s35_control.build),     # enforcement actions and operator controls, once identity decided
    ("validation", s40_validate.build),
    ("work", s50_work.build),
    ("admission", s60_admit.build),
    ("count_tokens", s25_dialect.build_count),   # /v1/messages/count_tokens answered with work's count
    ("screening", s70_screen.build),
    ("transform", s80_transform.build),
    ("cache", s85_cache.build),
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
