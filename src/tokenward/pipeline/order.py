"""The stage order, declared once. Cheap checks first; ``forward`` is the runner's last step.

A slot without an implementation yet is skipped; adding a stage means adding its module
under ``tokenward.stages`` and naming its factory here.
"""

from __future__ import annotations

STAGE_ORDER: tuple[str, ...] = (
    "edge",
    "identity",
    "entitlement",
    "control",          # enforcement actions and operator controls, where identity/entitlement decide
    "validation",
    "work",
    "admission",
    "screening",
    "transform",
    "cache",
)

# slot -> "module:factory"; each factory takes the built ``Gateway`` services and returns a Stage.
STAGE_FACTORIES: dict[str, str] = {
    "edge": "tokenward.stages.s10_edge:build",
    "validation": "tokenward.stages.s40_validate:build",
    "work": "tokenward.stages.s50_work:build",
    "admission": "tokenward.stages.s60_admit:build",
    "identity": "tokenward.stages.s20_identity:build",
    "entitlement": "tokenward.stages.s30_entitlement:build",
    "control": "tokenward.stages.s35_control:build",
    "screening": "tokenward.stages.s70_screen:build",
    "transform": "tokenward.stages.s80_transform:build",
    "cache": "tokenward.stages.s85_cache:build",
}
