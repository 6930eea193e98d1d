"""An upstream's pool of targets: ``base_url`` (a pool of one) or ``targets``, checked and
overridden from the environment here (docs/upstreams.md, "Pools").

A target is named by its ``host:port`` as the config writes it (the port the scheme implies
when none is written): that is the ``target`` label of its metrics and what the decision
record lists in ``notes.targets``, so two targets of one pool may not share it.
"""

from __future__ import annotations

import re
from typing import Any, Mapping
from urllib.parse import urlsplit

from ..errors import ConfigError
from .schema import Config, TargetConfig, UpstreamConfig

_URL_ENV = re.compile(r"^TOKENWARD_UPSTREAM_([A-Z0-9_]+)_URLS?$")


def env_name(upstream: str) -> str:
    """``local-gpu`` -> ``LOCAL_GPU``: the part of an environment variable naming an upstream."""
    return re.sub(r"[^A-Z0-9]", "_", upstream.upper())


def pool_targets(up: UpstreamConfig, base_url: str | None = None) -> tuple[TargetConfig, ...]:
    """The targets of an upstream: its ``targets``, or its ``base_url`` (``base_url`` given
    here: the address ``builtin:mock`` resolved to) as a pool of one."""
    if up.targets:
        return up.targets
    return (TargetConfig(url=base_url or up.base_url or ""),)


def target_label(url: str) -> str:
    """``http://10.0.0.1:8000/v1`` -> ``10.0.0.1:8000``; ``https://engine.internal/v1`` ->
    ``engine.internal:443``. Only for a URL ``check_pools`` accepted."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a target's address, or None."""
    try:
        parts = urlsplit(url)
        parts.port   # raises on a port that is not a number or out of range
    except ValueError as exc:
        return f"{url!r} is not a URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"expected http(s)://host[:port][/path], got {url!r}"
    if parts.query or parts.fragment:
        return f"a target's URL has no query or fragment, got {url!r}"
    return None


def check_pools(cfg: Config) -> None:
    for name, up in cfg.upstreams.items():
        where = f"upstreams.{name}"
        if up.base_url is not None and up.targets:
            raise ConfigError(f"{where}.targets", "give base_url (one target) or targets, not both")
        if up.base_url is None and not up.targets:
            raise ConfigError(f"{where}.base_url", "missing required key (or a list of targets)")
        if up.eject_max_s < up.eject_base_s:
            raise ConfigError(f"{where}.eject_max_s", f"must be >= eject_base_s ({up.eject_base_s:g})")
        seen: dict[str, int] = {}
        for i, target in enumerate(up.targets):
            problem = url_problem(target.url)
            if problem is not None:
                raise ConfigError(f"{where}.targets[{i}].url", problem)
            label = target_label(target.url)
            if label in seen:
                raise ConfigError(f"{where}.targets[{i}].url",
                                  f"{label} is targets[{seen[label]}]'s address too: a pool's targets are "
                                  "told apart by host:port")
            seen[label] = i


def apply_url_env(upstreams: Any, environ: Mapping[str, str]) -> None:
    """``TOKENWARD_UPSTREAM_<NAME>_URL`` replaces a pool of one's address (its ``base_url``,
    or its one target's ``url``); ``TOKENWARD_UPSTREAM_<NAME>_URLS`` (comma-separated) the
    whole pool's. A pool given as many URLs as it lists targets keeps each target's weight
    and caps, in order; any other count gets plain targets."""
    if not isinstance(upstreams, dict):
        return
    by_env = {env_name(str(name)): name for name in upstreams}
    for key, value in environ.items():
        match = _URL_ENV.match(key)
        if not match or match.group(1) not in by_env:
            continue
        name = by_env[match.group(1)]
        raw = upstreams[name]
        if not isinstance(raw, dict):
            continue
        if key.endswith("_URLS"):
            _set_pool(raw, name, key, value)
        else:
            _set_one(raw, name, key, value)


def _set_one(raw: dict[str, Any], name: str, key: str, value: str) -> None:
    targets = raw.get("targets")
    if not targets:
        raw["base_url"] = value
        return
    if isinstance(targets, list) and len(targets) == 1 and isinstance(targets[0], dict):
        targets[0] = {**targets[0], "url": value}
        return
    count = len(targets) if isinstance(targets, list) else "several"
    raise ConfigError(f"upstreams.{name}.targets",
                      f"{key} sets a pool of one; this pool has {count} targets: set {key}S instead")


def _set_pool(raw: dict[str, Any], name: str, key: str, value: str) -> None:
    urls = [url.strip() for url in value.split(",") if url.strip()]
    if not urls:
        raise ConfigError(f"upstreams.{name}.targets", f"{key} is set but names no URL")
    given = raw.get("targets")
    if isinstance(given, list) and len(given) == len(urls) and all(isinstance(t, dict) for t in given):
        raw["targets"] = [{**target, "url": url} for target, url in zip(given, urls)]
    else:
        raw["targets"] = [{"url": url} for url in urls]
    raw.pop("base_url", None)


def env_source(path: str, environ: Mapping[str, str]) -> str | None:
    """The variable that set an upstream's address at ``path``, when one did."""
    match = re.fullmatch(r"upstreams\.(.+?)\.(base_url|targets(\[\d+\]\.url)?)", path)
    if match is None:
        return None
    stem = f"TOKENWARD_UPSTREAM_{env_name(match.group(1))}"
    for name in (f"{stem}_URLS", f"{stem}_URL"):
        if name in environ:
            return name
    return None
