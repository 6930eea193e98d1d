"""The checks ``serve`` makes before it binds, and all that ``check-config`` makes.

``load_config`` checks the shape, the ranges and the references; ``verify_config`` then
builds, without any network I/O, everything start-up would build from the config and
refuse: the token counters, the upstream target table (base URLs, header names, credential
env vars), the budget store and key store URLs, the screening policies (their detectors
loaded), the response cache, the JWT issuers' JWKS URLs and the log level. What it builds
is thrown away; only a store, a backend or an identity provider that does not answer is
left for start-up to find. Every failure is a ``ConfigError`` naming the path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from ..errors import ConfigError, MissingExtra
from ..config.schema import Config

if TYPE_CHECKING:
    import msgspec

    from ..tokenize.counters import Counter

_LEVELS = ("debug", "info", "warning", "error", "critical")


def verify_config(cfg: Config) -> None:
    """Raise ``ConfigError`` for anything ``serve``'s start-up would refuse in this config."""
    _check_log_level(cfg)
    _check_server_tls(cfg)
    check_workers(cfg, cfg.server.workers)
    counters = _check_tokenizers(cfg)
    _check_upstreams(cfg, counters)
    _check_stores(cfg)
    _check_screening(cfg)
    _check_cache(cfg)
    _check_jwt(cfg)


def check_workers(cfg: Config, workers: int) -> None:
    """Several workers need a shared budget store: with ``memory`` each worker would keep its
    own budgets, and a tenant could spend its limits once per worker."""
    if workers > 1 and cfg.store.url == "memory":
        raise ConfigError("server.workers", f"{workers} workers need a shared budget store: with store.url "
                          "memory each worker keeps its own budgets (a tenant could spend its limits "
                          f"{workers} times); set store.url to a Redis URL, or run one worker")


def _check_server_tls(cfg: Config) -> None:
    if cfg.server.tls is None:
        return
    import ssl

    from ..http.tls import server_tls

    try:
        server_tls(cfg)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("server.tls", f"cannot load the certificate and key: {exc}") from None


def _check_log_level(cfg: Config) -> None:
    level = cfg.logging.level
    if level.lower() not in _LEVELS:
        raise ConfigError("logging.level", f"expected one of {', '.join(_LEVELS)}, got {level!r}")


def _check_tokenizers(cfg: Config) -> dict[str, Counter]:
    from ..tokenize.registry import TokenizerRegistry

    return TokenizerRegistry(cfg).counters


def _check_upstreams(cfg: Config, counters: dict[str, Counter]) -> None:
    from ..config.schema import BUILTIN_MOCK   # started in-process: no URL to check
    from ..upstream.client import UpstreamPool
    from ..upstream.targets import TargetTable

    placeholder = "http://127.0.0.1:1/v1"
    resolved = {}
    for name, up in cfg.upstreams.items():
        if up.base_url == BUILTIN_MOCK:
            resolved[name] = placeholder
            continue
        try:
            UpstreamPool(up.base_url, max_connections=1)
        except ValueError:
            raise ConfigError(f"upstreams.{name}.base_url",
                              f"expected http(s)://host[:port][/path] or {BUILTIN_MOCK}, got {up.base_url!r}") from None
    TargetTable(cfg, resolved, counters)   # header names, credential env vars, TLS settings


def _check_stores(cfg: Config) -> None:
    from ..keys.store import engine_url
    from ..budget.opening import open_store

    try:
        open_store(cfg)   # parses a Redis URL; connects only on first use
    except ValueError as exc:
        raise ConfigError("store.url", f"not a usable Redis URL: {exc}") from None
    engine_url(cfg.keystore.url)


def _check_screening(cfg: Config) -> None:
    """Each policy's detectors load, as start-up loads them; a policy no plan uses may name an
    extra that is not installed (``screening_warnings`` says so), as start-up allows."""
    from ..stages.s12_screening import CompiledPolicy

    used: set[object] = {plan.screening for plan in cfg.plans.values()}
    used |= {t.overrides.get("screening") for t in cfg.tenants.values() if isinstance(t.overrides, dict)}
    for name, policy in cfg.screening.policies.items():
        try:
            CompiledPolicy(name, policy)   # loads each detector, as start-up does
        except MissingExtra:
            if name in used:
                raise
        except ConfigError:
            raise
        except Exception as exc:  # a python:module:factory detector may fail any way
            raise ConfigError(f"screening.policies.{name}", f"cannot load its detectors: {exc}") from None


def _check_cache(cfg: Config) -> None:
    if cfg.cache is None:
        return
    from ..stages.s14_cache import open_cache

    try:
        open_cache(cfg)   # the secret it needs, the Redis URL it would use
    except ValueError as exc:
        raise ConfigError("cache.url", f"not a usable Redis URL: {exc}") from None


def _check_jwt(cfg: Config) -> None:
    for i, issuer in enumerate(cfg.jwt.issuers):
        if not issuer.jwks_url.startswith(("https://", "http://")):
            raise ConfigError(f"jwt.issuers[{i}].jwks_url", f"must be http(s)://..., got {issuer.jwks_url!r}")



# Plan limits where 0 means "no limit", unlike every other limit, where 0 allows none of it
# (daily_spend_usd: 0, max_tools: 0...): check-config says so wherever one is 0.
ZERO_IS_UNLIMITED = ("tokens_per_minute", "requests_per_minute", "max_concurrent_streams")


def config_warnings(cfg: Config, environ: Mapping[str, str]) -> list[str]:
    """What check-config warns of: the config works, but not as its reader may think."""
    found = []
    env = cfg.admin.token_env
    if env is not None and not environ.get(env):
        found.append(f"admin.token_env: environment variable {env} is not set: /admin/* (the status page, "
                     "keys, reload) answers route_denied until it is set where the gateway starts")
    for name, plan in cfg.plans.items():
        found += _zero_limits(f"plans.{name}", msgspec_fields(plan))
        if plan.default_max_tokens is not None and plan.default_max_tokens > plan.max_output_tokens:
            found.append(f"plans.{name}.default_max_tokens: {plan.default_max_tokens} is above max_output_tokens "
                         f"({plan.max_output_tokens}): a request without max_tokens gets {plan.max_output_tokens}")
    for name, tenant in cfg.tenants.items():
        found += _zero_limits(f"tenants.{name}.overrides", tenant.overrides)
    return found + screening_warnings(cfg) + _dropped_client_salts(cfg)


def screening_warnings(cfg: Config) -> list[str]:
    """A policy whose extra is not installed (the gateway refuses it only when a plan uses it),
    and a policy that masks personal data without names (the built-in patterns find none)."""
    import importlib.util

    found = []
    extras = {"classifier": ("onnxruntime", "classifier"), "presidio": ("presidio_analyzer", "presidio")}
    for name, policy in cfg.screening.policies.items():
        where = f"screening.policies.{name}"
        detectors: set[str] = set()
        for section in (policy.injection, policy.injection.tool_output if policy.injection else None):
            if section is not None:
                detectors |= set(section.detectors or (section.detector,))
        if policy.pii is not None:
            detectors.add(policy.pii.detector)
            if policy.pii.regions and importlib.util.find_spec("phonenumbers") is None:
                found.append(f"{where}.pii.regions: needs the regions extra (pip install 'tokenward[regions]'); "
                             "a plan using this policy is refused at start")
            if policy.pii.detector == "patterns" and policy.pii.mode in ("redact", "tokenize", "block"):
                found.append(f"{where}.pii: names are not masked (the built-in patterns find no PERSON); "
                             "detector: presidio with the presidio extra finds them")
        for detector in sorted(detectors & set(extras)):
            module, extra = extras[detector]
            if importlib.util.find_spec(module) is None:
                found.append(f"{where}: detector {detector} needs the {extra} extra (pip install "
                             f"'tokenward[{extra}]'); a plan using this policy is refused at start")
    return found


def _dropped_client_salts(cfg: Config) -> list[str]:
    """A plan that lets clients send cache_salt, with models on an upstream that salts nothing:
    there the client's salt is dropped (upstream/salt.py), which its reader may not expect."""
    found = []
    for name, plan in cfg.plans.items():
        if not plan.allow_cache_salt:
            continue
        unsalted = sorted({spec.upstream for model, spec in cfg.models.items()
                           if model in plan.models and cfg.upstreams[spec.upstream].cache_salt == "off"})
        if unsalted:
            found.append(f"plans.{name}.allow_cache_salt: a client's cache_salt is dropped on upstream "
                         f"{', '.join(unsalted)} (its cache_salt is off)")
    return found


def msgspec_fields(struct: msgspec.Struct) -> dict[str, Any]:
    import msgspec

    return msgspec.structs.asdict(struct)


def _zero_limits(where: str, values: Mapping[str, object]) -> list[str]:
    return [f"{where}.{field}: 0 means no limit here (for the other limits, daily_spend_usd: 0 for one, "
            "0 allows none)" for field in ZERO_IS_UNLIMITED if values.get(field) == 0]
