"""Where each public model goes: its upstream's pool of targets, backend model name and headers.

Built once at start-up so the hot path only looks up a dict: the backend credential
header, the forwarded-header allowlist and the model rename are all precomputed. Each
upstream is one ``BackendPool`` (upstream/pool.py): its ``base_url`` as a pool of one, or
its ``targets``, each with its own keep-alive connections.
"""

from __future__ import annotations

import os
import re
import ssl
from typing import TYPE_CHECKING, Mapping

from ..config.pools import pool_targets, target_label, url_problem
from ..config.schema import Config, UpstreamConfig
from ..errors import ConfigError
from ..observe.metrics import GatewayMetrics
from .client import UpstreamPool
from .pool import BackendPool, Replica
from .pool_status import PoolStatus
from .response_head import Transport
from .salt import CacheSalt, salt_for

if TYPE_CHECKING:
    from ..tokenize.counters import Counter

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class HeaderAllowlist:
    """Client headers a backend may see: exact names, or prefixes written ``x-mock-*``."""

    __slots__ = ("exact", "prefixes")

    # Credentials and hop-by-hop headers never pass, whatever the config says.
    NEVER = frozenset({b"authorization", b"x-api-key", b"cookie", b"proxy-authorization", b"host",
                       b"content-length", b"transfer-encoding", b"connection", b"keep-alive",
                       b"upgrade", b"te", b"trailer", b"x-tenant-id"})

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.exact = frozenset(p.lower().encode() for p in patterns if not p.endswith("*"))
        self.prefixes = tuple(p[:-1].lower().encode() for p in patterns if p.endswith("*"))

    def select(self, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        if not self.exact and not self.prefixes:
            return []
        out = []
        for name, value in headers:
            if name in self.NEVER:
                continue
            if name in self.exact or (self.prefixes and name.startswith(self.prefixes)):
                out.append((name, value))
        return out


class Target:
    __slots__ = ("model", "upstream_name", "backends", "backend_model", "auth_headers", "allow",
                 "read_timeout", "request_id_header", "request_id_format", "output_counter", "answered",
                 "answer_bytes_per_token", "answer_slack_bytes", "metrics", "salt")

    def __init__(self, model: str, upstream_name: str, backends: BackendPool, backend_model: str,
                 auth_headers: list[tuple[bytes, bytes]], allow: HeaderAllowlist,
                 read_timeout: float, up: UpstreamConfig | None = None, output_counter: Counter | None = None,
                 metrics: GatewayMetrics | None = None) -> None:
        self.model = model
        self.upstream_name = upstream_name
        self.metrics = metrics if metrics is not None else GatewayMetrics()
        # the upstream's time-to-answer histogram slots (whole, stream): observe/metrics.py
        self.answered = self.metrics.upstream_slots(upstream_name)
        self.backends = backends
        self.backend_model = backend_model
        self.auth_headers = auth_headers
        self.allow = allow
        self.read_timeout = read_timeout
        up = up or UpstreamConfig(base_url="")
        # the header carrying the request's id to the backend (None: none is sent)
        self.request_id_header = up.request_id_header.lower().encode() if up.request_id_header else None
        self.request_id_format = up.request_id_format
        # how large an answer may be, per token of the request's bounds (pipeline/bounds.py)
        self.answer_bytes_per_token = up.answer_bytes_per_token
        self.answer_slack_bytes = up.answer_slack_bytes
        # the model's own tokenizer, to count streamed output a backend does not report;
        # None for ``estimate`` (token events are counted instead)
        self.output_counter = output_counter
        # the upstream's cache_salt (upstream/salt.py; set by TargetTable): None, nothing to do
        self.salt: CacheSalt | None = None

    @property
    def renames(self) -> bool:
        return self.backend_model != self.model


def auth_headers(name: str, up: UpstreamConfig) -> list[tuple[bytes, bytes]]:
    key = up.api_key
    if up.api_key_env:
        key = os.environ.get(up.api_key_env, "").strip() or None
        if key is None:
            raise ConfigError(f"upstreams.{name}.api_key_env", f"environment variable {up.api_key_env} is not set")
    return [(b"authorization", b"Bearer " + key.encode())] if key else []


def tls_context(name: str, up: UpstreamConfig) -> ssl.SSLContext:
    """The client TLS of an https upstream: the system's trust or ``ca_file``, a client
    certificate for mutual TLS, or no verification when ``tls_verify: false``. A file that
    does not load is a ConfigError naming the field, at start-up."""
    path = f"upstreams.{name}"
    try:
        context = ssl.create_default_context(cafile=up.ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{path}.ca_file", f"cannot load {up.ca_file!r}: {exc}") from None
    if up.client_cert_file is not None or up.client_key_file is not None:
        if up.client_cert_file is None:
            raise ConfigError(f"{path}.client_cert_file", "client_key_file needs client_cert_file too")
        try:
            context.load_cert_chain(up.client_cert_file, up.client_key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{path}.client_cert_file", f"cannot load the client certificate: {exc}") from None
    if not up.tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def pool_for(name: str, up: UpstreamConfig, base_url: str) -> UpstreamPool:
    """The pool serve opens for an upstream (check-config --connect probes through one too)."""
    context = tls_context(name, up) if base_url.startswith("https://") else None
    return UpstreamPool(base_url, max_connections=up.pool_size, connect_timeout=up.connect_timeout_s,
                        read_timeout=up.read_timeout_s, pool_timeout=up.pool_timeout_s,
                        ssl_context=context, idle_timeout=up.idle_timeout_s)


def _check_header_name(name: str, up: UpstreamConfig) -> None:
    if up.request_id_header is not None and up.request_id_header != "" and not _TOKEN.fullmatch(up.request_id_header):
        raise ConfigError(f"upstreams.{name}.request_id_header",
                          f"{up.request_id_header!r} is not an HTTP header name")


class TargetTable:
    def __init__(self, config: Config, resolved_urls: dict[str, str], counters: dict[str, Counter] | None = None,
                 metrics: GatewayMetrics | None = None, transports: Mapping[str, Transport] | None = None) -> None:
        """``transports``: an upstream's transport when it is not HTTP over TCP (a test's
        in-process backend, upstream/memory.py), by upstream name: a pool of one."""
        # check-config builds the table to check it, with metrics of its own that no one reads
        metrics = metrics if metrics is not None else GatewayMetrics()
        self.pools: dict[str, BackendPool] = {}
        self.targets: dict[str, Target] = {}
        salts: dict[str, CacheSalt | None] = {}
        for name, up in config.upstreams.items():
            _check_header_name(name, up)
            salts[name] = salt_for(name, up, config)   # a salting scope without its secret: refused here
            given = transports.get(name) if transports else None
            self.pools[name] = _backend_pool(name, up, resolved_urls.get(name), given)
        metrics.watch_pools(self)
        counters = counters or {}
        for model, spec in config.models.items():
            up = config.upstreams[spec.upstream]
            counter = counters.get(model)
            exact = counter if counter is not None and counter.kind != "estimate" else None
            self.targets[model] = Target(
                model, spec.upstream, self.pools[spec.upstream], spec.upstream_model or model,
                auth_headers(spec.upstream, up), HeaderAllowlist(up.forward_headers), up.read_timeout_s,
                up, exact, metrics)
            self.targets[model].salt = salts[spec.upstream]

    def get(self, model: str) -> Target | None:
        return self.targets.get(model)

    def snapshots(self) -> dict[str, PoolStatus]:
        """Each upstream's targets as the status page shows them (upstream/pool_status.py)."""
        return {name: pool.snapshot() for name, pool in self.pools.items()}

    def target_states(self) -> list[tuple[str, str, bool, int]]:
        """(upstream, target, admitted, reserved tokens in flight): the per-target gauges."""
        return [(name, *state) for name, pool in self.pools.items() for state in pool.states()]

    async def aclose(self) -> None:
        for pool in self.pools.values():
            await pool.aclose()


def _backend_pool(name: str, up: UpstreamConfig, resolved: str | None, transport: Transport | None) -> BackendPool:
    """An upstream's pool: a transport each target (``transport``: the one given for a pool
    of one), labelled by its host:port."""
    targets = pool_targets(up, resolved)
    if transport is not None and len(targets) != 1:
        raise ConfigError(f"upstreams.{name}.targets", "an in-process transport stands for a pool of one")
    replicas = [Replica(target_label(t.url) if url_problem(t.url) is None else name, t.url,
                        transport if transport is not None else pool_for(name, up, t.url),
                        t.weight, t.max_inflight_requests, t.max_inflight_tokens)
                for t in targets]
    return BackendPool(name, up, replicas)
