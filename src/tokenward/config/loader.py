"""Load a YAML config into ``Config``; the one loader ``serve`` and ``check-config`` share.

Errors are ``ConfigError("plans.team.max_output_tokens", "expected int, got str")``.
"""

from __future__ import annotations

import difflib
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

import msgspec
import yaml

from ..errors import ConfigError
from .aliases import check_aliases
from .globs import pattern_error
from .pools import apply_url_env, check_pools
from .pools import env_source as upstream_env_source
from .schema import DEFAULT_ROUTES, RANGES, Config, PlanConfig

_NONE = type(None)
_TYPE_NAMES = {int: "int", float: "float", str: "str", bool: "bool", _NONE: "null"}


def _name(value: Any) -> str:
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list):
        return "list"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _hints(struct_type: type) -> dict[str, Any]:
    return typing.get_type_hints(struct_type)


def _convert(value: Any, tp: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return _convert_union(value, typing.get_args(tp), path)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return _convert_struct(value, tp, path)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(path, f"expected mapping, got {_name(value)}")
        _, val_tp = typing.get_args(tp)
        return {str(k): _convert(v, val_tp, _join(path, k)) for k, v in value.items()}
    if origin is tuple:
        if not isinstance(value, list):
            raise ConfigError(path, f"expected list, got {_name(value)}")
        item_tp = typing.get_args(tp)[0]
        return tuple(_convert(v, item_tp, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is Literal:
        allowed = typing.get_args(tp)
        if isinstance(value, bool):
            value = _yaml_word(value, allowed)
        if value not in allowed:
            raise ConfigError(path, f"expected one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value
    return _convert_leaf(value, tp, path)


# YAML 1.1 reads a bare off/no/false (on/yes/true) as a boolean: where the schema means
# one of these words, the word it was is taken back (``output: off`` is "off", not False).
_YAML_WORDS = {False: ("off", "no", "false"), True: ("on", "yes", "true")}


def _yaml_word(value: bool, allowed: tuple[Any, ...]) -> object:
    return next((word for word in _YAML_WORDS[value] if word in allowed), value)


def _convert_union(value: Any, args: tuple[Any, ...], path: str) -> Any:
    if value is None and _NONE in args:
        return None
    real = [a for a in args if a is not _NONE]
    if len(real) == 1:
        return _convert(value, real[0], path)
    for arg in real:
        try:
            return _convert(value, arg, path)
        except ConfigError:
            continue
    raise ConfigError(path, f"unexpected {_name(value)}")


def _convert_leaf(value: Any, tp: Any, path: str) -> Any:
    if tp is object:
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool):
        if type(value) is not tp:
            raise ConfigError(path, f"expected {_TYPE_NAMES[tp]}, got {_name(value)}")
        return value
    raise ConfigError(path, f"unsupported config type {tp!r}")


def _convert_struct(value: Any, tp: type, path: str) -> Any:
    if not isinstance(value, dict):
        raise ConfigError(path, f"expected mapping, got {_name(value)}")
    hints = _hints(tp)
    fields = {f.encode_name: f for f in msgspec.structs.fields(tp)}
    ranges = RANGES.get(tp, {})
    kwargs = {}
    for key, raw in value.items():
        field = fields.get(key)
        if field is None:
            raise ConfigError(_join(path, key), _unknown_key(str(key), fields))
        converted = kwargs[field.name] = _convert(raw, hints[field.name], _join(path, key))
        bound = ranges.get(field.name)
        if bound is not None and converted is not None and not bound.holds(converted):
            raise ConfigError(_join(path, key), bound.describe())
    for field in fields.values():
        if field.required and field.name not in kwargs:
            raise ConfigError(_join(path, field.encode_name), "missing required key")
    return tp(**kwargs)


def _unknown_key(key: str, known: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    return f"unknown key (did you mean {close[0]}?)" if close else "unknown key"


def _check_references(cfg: Config) -> None:
    check_pools(cfg)
    for name, model in cfg.models.items():
        if model.upstream not in cfg.upstreams:
            raise ConfigError(f"models.{name}.upstream", f"unknown upstream {model.upstream!r}")
    for name, plan in cfg.plans.items():
        for i, model_name in enumerate(plan.models):
            if model_name not in cfg.models:
                raise ConfigError(f"plans.{name}.models[{i}]", f"unknown model {model_name!r}")
        if plan.screening is not None and plan.screening not in cfg.screening.policies:
            raise ConfigError(f"plans.{name}.screening", f"unknown screening policy {plan.screening!r}")
        _check_tool_patterns(plan.allow_tools, f"plans.{name}.allow_tools")
    check_aliases(cfg)
    _check_screening(cfg)
    for name, tenant in cfg.tenants.items():
        if tenant.plan not in cfg.plans:
            raise ConfigError(f"tenants.{name}.plan", f"unknown plan {tenant.plan!r}")
        base = msgspec.structs.asdict(cfg.plans[tenant.plan])
        merged = {**{k: list(v) if isinstance(v, tuple) else v for k, v in base.items()}, **tenant.overrides}
        overridden: PlanConfig = _convert(merged, PlanConfig, f"tenants.{name}.overrides")
        if "allow_tools" in tenant.overrides:
            _check_tool_patterns(overridden.allow_tools, f"tenants.{name}.overrides.allow_tools")
    check_capacity(cfg)
    if cfg.demo is not None and cfg.demo.tenant not in cfg.tenants:
        raise ConfigError("demo.tenant", f"unknown tenant {cfg.demo.tenant!r}")
    for i, route in enumerate(cfg.routes or ()):
        if not route.path.startswith("/"):
            raise ConfigError(f"routes[{i}].path", "must start with '/'")


def _check_tool_patterns(patterns: typing.Iterable[object], where: str) -> None:
    for i, pattern in enumerate(patterns):
        problem = pattern_error(pattern)
        if problem is not None:
            raise ConfigError(f"{where}[{i}]", problem)


def _check_screening(cfg: Config) -> None:
    for name, policy in cfg.screening.policies.items():
        injection = policy.injection
        # Each number's own range is checked while loading (schema.RANGES); this is the pair.
        if injection is not None and injection.restrict_at > injection.block_at:
            raise ConfigError(f"screening.policies.{name}.injection.restrict_at", "must not be above block_at")
        tool = injection.tool_output if injection is not None else None
        if tool is not None:
            where = f"screening.policies.{name}.injection.tool_output"
            if tool.restrict_at > tool.block_at:
                raise ConfigError(f"{where}.restrict_at", "must not be above block_at")
            if tool.tool_output is not None:
                raise ConfigError(f"{where}.tool_output", "tool_output sections do not nest")


def check_capacity(cfg: Config) -> None:
    """Service-wide capacity entries name a model or an upstream; shares leave a reserve."""
    for name, cap in cfg.capacity.items():
        where = f"capacity.{name}"
        if name not in cfg.models and name not in cfg.upstreams:
            raise ConfigError(where, f"{name!r} is neither a model nor an upstream")
        if cap.tokens_per_minute <= 0:
            raise ConfigError(f"{where}.tokens_per_minute", "must be > 0")
        for tenant, share in cap.shares.items():
            if tenant not in cfg.tenants:
                raise ConfigError(f"{where}.shares.{tenant}", f"unknown tenant {tenant!r}")
            if not 0 < share < 1:
                raise ConfigError(f"{where}.shares.{tenant}", "must be between 0 and 1")
        if sum(cap.shares.values()) >= 1:
            raise ConfigError(f"{where}.shares", "guaranteed shares must leave a shared reserve (sum < 1)")


def apply_env(raw: dict[str, Any], environ: typing.Mapping[str, str]) -> dict[str, Any]:
    """Deployment overrides: TOKENWARD_STORE_URL, TOKENWARD_KEYSTORE_URL, and an upstream's
    address, TOKENWARD_UPSTREAM_<NAME>_URL (a pool of one) or _URLS (a pool: config/pools.py)."""
    if "TOKENWARD_STORE_URL" in environ:
        raw.setdefault("store", {})["url"] = environ["TOKENWARD_STORE_URL"]
    if "TOKENWARD_KEYSTORE_URL" in environ:
        raw.setdefault("keystore", {})["url"] = environ["TOKENWARD_KEYSTORE_URL"]
    apply_url_env(raw.get("upstreams") or {}, environ)
    return raw


def env_source(path: str, environ: typing.Mapping[str, str]) -> str | None:
    """The environment variable that set the value at ``path`` (``store.url`` ->
    ``TOKENWARD_STORE_URL``), when one did: an error there is the variable's, not the file's."""
    fixed = {"store.url": "TOKENWARD_STORE_URL", "keystore.url": "TOKENWARD_KEYSTORE_URL"}
    name = fixed.get(path)
    if name is None:
        return upstream_env_source(path, environ)
    return name if name in environ else None


def resolve_sqlite_url(url: str, base_dir: Path) -> str:
    """``sqlite:///keys.db`` -> ``sqlite:////<base_dir>/keys.db``: a relative SQLite path is
    relative to the config file's folder. Absolute paths, in-memory databases and other
    databases are returned unchanged."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+", 1)[0] != "sqlite" or not rest.startswith("/"):
        return url
    path = rest[1:]
    if path.split("?", 1)[0] in ("", ":memory:") or path.startswith(("/", "file:")):
        return url
    return f"{scheme}:///{Path(base_dir, path)}"


def parse_config(text: str, environ: typing.Mapping[str, str] | None = None,
                 base_dir: str | Path | None = None) -> Config:
    """``base_dir``: the config file's folder, which relative SQLite paths in the file (and
    the default one) are relative to; ``TOKENWARD_KEYSTORE_URL`` is taken as it is, so a
    relative path there is relative to the working directory."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "yaml"
        raise ConfigError("", f"invalid YAML at {where}: {getattr(exc, 'problem', exc)}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("", f"expected a mapping at the top level, got {_name(raw)}")
    env = os.environ if environ is None else environ
    raw = apply_env(raw, env)
    cfg: Config = _convert(raw, Config, "")
    if base_dir is not None and "TOKENWARD_KEYSTORE_URL" not in env:
        url = resolve_sqlite_url(cfg.keystore.url, Path(base_dir).resolve())
        cfg = msgspec.structs.replace(cfg, keystore=msgspec.structs.replace(cfg.keystore, url=url))
    _check_references(cfg)
    if cfg.routes is None:
        cfg = msgspec.structs.replace(cfg, routes=DEFAULT_ROUTES)
    return cfg


def load_config(path: str | Path, environ: typing.Mapping[str, str] | None = None) -> Config:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("", f"cannot read {path}: {exc.strerror}") from None
    return parse_config(text, environ, base_dir=Path(path).resolve().parent)


def effective_plan(cfg: Config, tenant: str) -> PlanConfig:
    """The tenant's plan with its overrides applied (validated at load)."""
    spec = cfg.tenants[tenant]
    plan = cfg.plans[spec.plan]
    if not spec.overrides:
        return plan
    fixed = _convert(dict(spec.overrides), dict[str, object], "")
    merged = {**msgspec.structs.asdict(plan), **fixed}
    effective: PlanConfig = _convert({k: list(v) if isinstance(v, tuple) else v for k, v in merged.items()},
                                     PlanConfig, "")
    return effective
