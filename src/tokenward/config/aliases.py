"""Model aliases: ``models.NAME.aliases: [patterns]`` serve other names as NAME.

A request naming NAME itself is NAME's, whatever any alias says (an exact name wins);
otherwise the one model whose alias matches serves it. Two models whose aliases could
both match one name are refused at start-up (``check_aliases``, exact by
``globs.overlap``), so a name never depends on the order of the config.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .globs import is_literal, overlap, pattern_error, to_regex

if TYPE_CHECKING:
    from .schema import Config


def check_aliases(cfg: Config) -> None:
    """Each alias is a well-formed pattern; a literal one names no model; no two models'
    aliases overlap."""
    owners: list[tuple[str, int, str]] = []   # (model, index, pattern)
    for name, model in cfg.models.items():
        for i, pattern in enumerate(model.aliases):
            where = f"models.{name}.aliases[{i}]"
            problem = pattern_error(pattern)
            if problem is not None:
                raise ConfigError(where, problem)
            if is_literal(pattern) and pattern in cfg.models:
                raise ConfigError(where, f"{pattern!r} is a model's own name (an exact name wins: the alias "
                                         f"would never be used)")
            for other, j, theirs in owners:
                both = overlap(pattern, theirs) if other != name else None
                if both is not None:
                    raise ConfigError(where, f"{pattern!r} and models.{other}.aliases[{j}] ({theirs!r}) both match "
                                             f"{both!r}: a name must belong to one model")
            owners.append((name, i, pattern))


class ModelAliases:
    """The alias table of a config: ``resolve(name)`` is the model that serves ``name``."""

    __slots__ = ("names", "literal", "_wild", "_owners")

    def __init__(self, cfg: Config) -> None:
        self.names = frozenset(cfg.models)
        self.literal: dict[str, str] = {}
        wild: list[str] = []
        self._owners: list[tuple[str, str]] = []   # (model, pattern), one per group of _wild
        for name, model in cfg.models.items():
            for pattern in model.aliases:
                if is_literal(pattern):
                    self.literal[pattern] = name
                else:
                    # one group per pattern: the group that matched names its model
                    wild.append(f"({to_regex(pattern)})")
                    self._owners.append((name, pattern))
        self._wild = re.compile("|".join(wild), re.DOTALL) if wild else None

    def __bool__(self) -> bool:
        return bool(self.literal) or self._wild is not None

    def resolve(self, asked: str) -> str | None:
        """The model that serves ``asked``: itself when it is a model's name, else the model
        one of whose aliases matches it, else None."""
        if asked in self.names:
            return asked
        found = self.match(asked)
        return found[0] if found is not None else None

    def match(self, asked: str) -> tuple[str, str] | None:
        """(model, alias pattern) for a name that is no model's own, or None."""
        name = self.literal.get(asked)
        if name is not None:
            return name, asked
        if self._wild is None:
            return None
        found = self._wild.fullmatch(asked)
        return self._owners[found.lastindex - 1] if found is not None and found.lastindex else None

    def listed(self, model: str) -> list[str]:
        """The literal aliases of ``model`` (what /v1/models lists beside it)."""
        return [alias for alias, name in self.literal.items() if name == model]
