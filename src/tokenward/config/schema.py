"""The config file's shape, as strict typed structs.

Every struct forbids unknown keys; ``loader.load_config`` walks these types itself so an
error names the full path of the offending key (``plans.team.max_output_tokens``), which
msgspec's own messages do not do for dict keys.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import msgspec

# The abuse and content sections live in their own modules and are re-exported here, where
# every config class is (``X as X``: an explicit re-export, as mypy's strict mode wants).
from .abuse import AbuseConfig as AbuseConfig, ControlConfig as ControlConfig
from .abuse import ranges as abuse_ranges
from .content import (
    CacheConfig as CacheConfig, InjectionScreening as InjectionScreening, PiiScreening as PiiScreening,
    ScreeningConfig as ScreeningConfig, ScreeningPolicy as ScreeningPolicy,
    SemanticCacheConfig as SemanticCacheConfig,
)
from .content import ranges as content_ranges

# an upstream base_url that starts the built-in mock backend in-process (the quickstart)
BUILTIN_MOCK = "builtin:mock"


# Subclasses say frozen=True again: msgspec inherits it, but type checkers read structs
# through PEP 681 (dataclass_transform), where a subclass that does not say it is not frozen.
class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pass


class TlsConfig(_Strict, frozen=True):
    cert_file: str
    key_file: str


class ServerConfig(_Strict, frozen=True):
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    # Lets a load balancer's health checks and Prometheus use the public listener.
    expose_metrics: bool = False
    # An idle keep-alive connection (or one that never finishes its request head) is closed
    # after this, and a request whose body stops arriving for this long gets 408.
    keep_alive_s: float = 30.0
    # On SIGTERM: stop accepting, give open requests (streams included) this long to finish.
    graceful_shutdown_s: float = 30.0
    # Client connections one worker holds at once; a connection past it is answered 503
    # too_many_connections and closed, so clients can never take the descriptors the
    # upstream pools and the stores need. None: the open-file limit less their share.
    max_connections: int | None = None
    # Slow clients (http/limits.py, README): a request head must arrive whole
    # within head_timeout_s, a body within body_timeout_s of its head and, after
    # body_rate_grace_s, at min_body_rate bytes a second or more (0: no rate rule); else 408.
    head_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    min_body_rate: int = 1024
    body_rate_grace_s: float = 5.0
    # Connections one client address may hold at once (null: no cap); one past it: 503
    # too_many_connections, as past max_connections.
    max_connections_per_client: int | None = None
    # HTTPS on the listener: PEM certificate chain and private key (README, Operations).
    tls: TlsConfig | None = None


class EdgeConfig(_Strict, frozen=True):
    max_body_bytes: int = 1_048_576
    max_header_bytes: int = 16_384
    max_headers: int = 64


class RouteConfig(_Strict, frozen=True):
    path: str
    methods: tuple[str, ...] = ("POST",)
    content_types: tuple[str, ...] = ("application/json",)
    max_body_bytes: int | None = None


class TargetConfig(_Strict, frozen=True):
    """One replica of an upstream's pool (docs/upstreams.md, "Pools"): the only per-target
    settings; the rest is the upstream's."""

    url: str
    weight: int = 1
    # caps within one gateway process (with N workers an engine may see N times these):
    # null, no cap
    max_inflight_requests: int | None = None
    max_inflight_tokens: int | None = None


class UpstreamConfig(_Strict, frozen=True):
    # "builtin:mock" starts the bundled mock backend inside the gateway process. A pool of
    # one; ``targets`` names several replicas instead (exactly one of the two: config/pools.py).
    base_url: str | None = None
    targets: tuple[TargetConfig, ...] = ()
    # How a request picks its target (upstream/routing.py): the least outstanding reserved
    # work, the fewest requests, in turn, or where its prompt's prefix went last.
    routing: Literal["least_reserved", "least_requests", "round_robin", "prefix_affinity"] = "least_reserved"
    # targets tried before the first byte of an answer (1: no failover)
    max_attempts: int = 2
    # every target at its cap: refuse upstream_saturated at once (0), or wait this long
    queue_timeout_ms: int = 0
    # a target failing this many times in a row (connect, 5xx, timeout) is ejected for
    # eject_base_s, doubling up to eject_max_s; a good probe readmits it at once
    eject_after: int = 3
    eject_base_s: float = 5.0
    eject_max_s: float = 60.0
    # each target of a pool of several is probed this often (health_path)
    health_interval_s: float = 2.0
    # prefix_affinity: the target that served a prefix keeps it while its outstanding
    # reserved work (per unit of weight) is within this many tokens of the least loaded's
    affinity_slack: int = 16384
    # a target that took the request and sent no byte before read_timeout_s is not asked
    # again elsewhere (it may still be working on it) unless this says so
    retry_on_timeout: bool = False
    api_key: str | None = None
    api_key_env: str | None = None
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 600.0
    pool_size: int = 256
    pool_timeout_s: float = 5.0
    # A pooled connection idle this long is closed rather than reused: keep it under the
    # backend's keep-alive timeout (uvicorn, so vLLM and llama.cpp's Python server: 5 s).
    idle_timeout_s: float = 4.0
    # Client headers passed through to this backend (exact names or "prefix-*").
    forward_headers: tuple[str, ...] = ()
    tls_verify: bool = True
    # https upstreams: a CA bundle to trust instead of the system's, and a client
    # certificate (PEM) for backends that require mutual TLS.
    ca_file: str | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None
    # The header that carries the request's id to this backend; null or "" sends none.
    # "uuid" sends it as a UUID (llama.cpp's Python server answers 400 to anything else),
    # "gateway" as the gateway's own id (req_...). docs/upstreams.md.
    request_id_header: str | None = "x-request-id"
    request_id_format: Literal["uuid", "gateway"] = "uuid"
    # /readyz probes GET <base_url><health_path> (null: not probed), at most once per TTL;
    # while a required upstream fails its probe, /readyz answers 503 (upstream/health.py).
    health_path: str | None = "/models"
    health_ttl_s: float = 2.0
    health_timeout_s: float = 1.0
    ready_required: bool = True
    # An answer (whole body or stream) larger than the request could justify is cut: more
    # than answer_bytes_per_token x (output bound x choices) + answer_slack_bytes
    # (pipeline/bounds.py, docs/upstreams.md "Bounded answers").
    answer_bytes_per_token: int = 8192
    answer_slack_bytes: int = 65536
    # The request dialects this backend serves itself (docs/dialects.md): a request in
    # another one is translated to chat completions and its answer translated back.
    dialects: tuple[Literal["chat", "responses", "messages"], ...] = ("chat",)
    # Tenant isolation of the engine's prefix cache (docs/security.md): every body sent here
    # carries cache_salt, an HMAC of the tenant (or API key id) under the secret in the
    # environment variable cache_salt_secret_env names. off: none (a backend that does not
    # know the field may refuse it); a client's own salt is then dropped (upstream/salt.py).
    cache_salt: Literal["off", "tenant", "key"] = "off"
    cache_salt_secret_env: str = "TOKENWARD_CACHE_SALT_SECRET"


class ModelConfig(_Strict, frozen=True):
    upstream: str
    upstream_model: str | None = None
    tokenizer: str = "estimate"
    # The chat template family, for per-message token overheads (tokenize/templates.py);
    # None: detected from the tokenizer, else conservative.
    chat_template: Literal["chatml", "llama3", "gemma", "phi3", "openai"] | None = None
    # The routes this model serves: embeddings go only to a model declared for them.
    serves: tuple[Literal["chat", "completions", "embeddings"], ...] = ("chat", "completions")
    context_window: int = 8192
    input_price_per_million: float = 0.0
    output_price_per_million: float = 0.0
    # Other names served as this model (globs: * and ?, config/globs.py); an exact model
    # name wins over an alias, and two models' aliases may not match one name.
    aliases: tuple[str, ...] = ()


class PlanConfig(_Strict, frozen=True):
    models: tuple[str, ...] = ()
    max_context_tokens: int = 8192
    max_output_tokens: int = 1024
    # Fills a request's missing output bound (max_tokens, max_completion_tokens,
    # max_output_tokens), at most max_output_tokens; None: a missing bound is refused
    # (max_tokens_required). The answer then carries x-tokenward-max-tokens.
    default_max_tokens: int | None = None
    tokens_per_minute: int = 100_000
    max_concurrent_streams: int = 4
    allow_system_prompt: bool = True
    system_prompt: str | None = None
    allow_tools: tuple[str, ...] = ()   # client-run tool names, as globs ("*", "mcp__*", "ns.*")
    allow_files: tuple[str, ...] = ()
    max_n: int = 1
    allow_best_of: bool = False
    max_best_of: int = 1
    # A client may send its own cache_salt (1-256 printable ASCII characters): folded into the
    # gateway's salt on an upstream with cache_salt on, dropped on one without (upstream/salt.py).
    allow_cache_salt: bool = False
    max_outer_items: int = 16
    max_messages: int = 256
    max_content_parts: int = 64
    max_stop: int = 4
    max_tools: int = 32
    max_request_work: int = 2_000_000
    requests_per_minute: int = 600
    daily_spend_usd: float | None = None
    monthly_spend_usd: float | None = None
    features: tuple[str, ...] = ()
    hidden_characters: Literal["strip", "refuse"] = "strip"
    shadow: tuple[str, ...] = ()
    # Budget limits beyond the ones above (docs/budget.md); None = no such limit.
    spend_per_minute_usd: float | None = None   # a cost-unit rate bucket covering every model
    max_inflight_tokens: int | None = None      # reserved work outstanding at once
    key_tokens_per_minute: int | None = None    # per API key, inside the tenant's budget
    key_requests_per_minute: int | None = None
    # Validation bounds (docs/validation.md): each caller-controlled size has its own cap.
    max_part_chars: int = 262_144        # one text part, message content or prompt string
    max_logit_bias: int = 300            # logit_bias entries (and allowed_token_ids)
    max_schema_bytes: int = 65_536       # one free-form JSON value: tool parameters, json_schema
    max_schema_depth: int = 32
    max_attachment_bytes: int = 4_194_304  # one decoded data: payload
    structured_output_surcharge: int = 256  # work tokens added for a constrained output
    attachment_surcharge: int = 1024     # work tokens added per attachment (plus its own size)
    # Content screening: a policy name under screening.policies (None: not screened), and
    # the output cap a "restrict" outcome clamps max_tokens to.
    screening: str | None = None
    restricted_max_output_tokens: int = 256
    # The response cache (cache section): opt in per plan; TTL per plan (None: the cache's).
    cache: bool = False
    cache_ttl_seconds: float | None = None
    cache_semantic: bool = False         # also serve paraphrases (cache.semantic; docs/cache.md)
    # Agent jobs (docs/jobs.md): what POST /v1/jobs may ask. A job's budget_tokens at most
    # (budget_usd at most, for a job budgeted in cost); jobs open at once per tenant (0: no
    # jobs on this plan); creations per minute per tenant; a job's max_seconds at most (and
    # its default).
    max_job_tokens: int = 1_000_000
    max_job_usd: float = 10.0
    max_open_jobs: int = 16
    jobs_per_minute: int = 60
    max_job_seconds: float = 3600.0


class TenantConfig(_Strict, frozen=True):
    plan: str
    # Partial plan: any PlanConfig field, checked against PlanConfig at load.
    overrides: dict[str, object] = msgspec.field(default_factory=dict)


class StoreConfig(_Strict, frozen=True):
    url: str = "memory"
    # a healthy Redis call's p99.9 under load on a 2-core host is 15-60 ms (docs/budget.md)
    timeout_ms: int = 250
    # the budget store's breaker opens after this many failed calls in a row (budget/guard.py)
    breaker_failures: int = 5
    failure_policy: Literal["closed", "open"] = "closed"
    fail_open_tiers: tuple[str, ...] = ()
    lease_s: float = 30.0
    # A fail-open tier's process-local limiter gets this fraction of every limit.
    fail_open_fraction: float = 0.1
    key_prefix: str = "tw"
    # Redis transport: "resp" (a lean multiplexed client, hiredis parser) or "redis-py".
    client: Literal["resp", "redis-py"] = "resp"


class CapacityConfig(_Strict, frozen=True):
    """Service-wide capacity of one upstream or model (the provider's own quota)."""

    tokens_per_minute: int
    # tenant -> guaranteed fraction only that tenant draws on first; the rest is a shared reserve
    shares: dict[str, float] = msgspec.field(default_factory=dict)


class KeystoreConfig(_Strict, frozen=True):
    url: str = "sqlite:///tokenward-keys.db"
    cache_ttl_s: float = 1.0
    # Last-used times are written in one batch this often, never once per request.
    last_used_flush_s: float = 5.0
    # This deployment's name; a key scoped to environments works only where it matches.
    environment: str | None = None


# Asymmetric only: "none" and HMAC (shared-secret) algorithms cannot be configured, so a
# token cannot be "verified" with a public key used as an HMAC secret.
JwtAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
                       "EdDSA"]


class JwtIssuerConfig(_Strict, frozen=True):
    issuer: str
    audience: str
    jwks_url: str
    algorithms: tuple[JwtAlgorithm, ...] = ("RS256", "ES256")
    # Where the tenant comes from: a claim (dotted path allowed, "org.id") or a scope prefix
    # ("gw/tenant-" turns the scope "gw/tenant-acme" into tenant acme). Exactly one.
    tenant_claim: str | None = None
    tenant_scope_prefix: str | None = None
    jwks_ttl_s: float = 300.0
    # An unknown kid triggers a refetch at most this often, so made-up kids cannot storm the IdP.
    jwks_min_refetch_s: float = 30.0
    fetch_timeout_s: float = 5.0
    leeway_s: float = 10.0

    def __post_init__(self) -> None:
        if (self.tenant_claim is None) == (self.tenant_scope_prefix is None):
            from ..errors import ConfigError

            raise ConfigError(f"jwt.issuers[issuer={self.issuer}]",
                              "set exactly one of tenant_claim and tenant_scope_prefix")


class JwtConfig(_Strict, frozen=True):
    issuers: tuple[JwtIssuerConfig, ...] = ()


class StreamConfig(_Strict, frozen=True):
    max_duration_s: float = 600.0
    idle_timeout_s: float = 60.0


class DemoConfig(_Strict, frozen=True):
    # Demo mode only: create and print a key for this tenant at start-up.
    tenant: str
    print_key: bool = True


class LoggingConfig(_Strict, frozen=True):
    # "stdout", "stderr", "off" or a file path; one JSON line per request.
    # (YAML reads a bare `off` as false, so false means "off" too.)
    decisions: str | bool = "stdout"
    level: str = "info"
    # A keyed hash of prompts goes into records; the key comes from this env var.
    hash_key_env: str = "TOKENWARD_LOG_HASH_KEY"


class AdminConfig(_Strict, frozen=True):
    token_env: str | None = None


class MemosConfig(_Strict, frozen=True):
    # What the memos keyed by text (token counts, the built-in detectors' findings: memos.py)
    # hold at most, over every memo and tenant, in bytes of memory; ~240 bytes a text, so the
    # default keeps ~280,000 texts answered (an agent session resends ~17 a turn); 0: none.
    max_bytes: int = 64 * 2**20


class Config(_Strict, frozen=True):
    server: ServerConfig = ServerConfig()
    edge: EdgeConfig = EdgeConfig()
    routes: tuple[RouteConfig, ...] | None = None
    upstreams: dict[str, UpstreamConfig] = msgspec.field(default_factory=dict)
    models: dict[str, ModelConfig] = msgspec.field(default_factory=dict)
    plans: dict[str, PlanConfig] = msgspec.field(default_factory=dict)
    tenants: dict[str, TenantConfig] = msgspec.field(default_factory=dict)
    store: StoreConfig = StoreConfig()
    keystore: KeystoreConfig = KeystoreConfig()
    stream: StreamConfig = StreamConfig()
    demo: DemoConfig | None = None
    logging: LoggingConfig = LoggingConfig()
    screening: ScreeningConfig = ScreeningConfig()
    cache: CacheConfig | None = None
    admin: AdminConfig = AdminConfig()
    # upstream or model name -> its service-wide capacity (budget admission)
    capacity: dict[str, CapacityConfig] = msgspec.field(default_factory=dict)
    jwt: JwtConfig = JwtConfig()
    # abuse signals and graduated actions (config/abuse.py); None: no signals
    abuse: AbuseConfig | None = None
    control: ControlConfig = ControlConfig()
    memos: MemosConfig = MemosConfig()



class Bound(NamedTuple):
    """The range of one numeric field: ``lo`` (exclusive when ``open_lo``), up to ``hi``."""

    lo: int | float
    hi: int | float | None = None
    open_lo: bool = False

    def holds(self, value: int | float) -> bool:
        above = value > self.lo if self.open_lo else value >= self.lo
        return above and (self.hi is None or value <= self.hi)

    def describe(self) -> str:
        low = f"> {self.lo}" if self.open_lo else f">= {self.lo}"
        if self.hi is None:
            return f"must be {low}"
        return f"must be {low} and <= {self.hi}" if self.open_lo else f"must be between {self.lo} and {self.hi}"


_NONNEG = Bound(0)                  # >= 0
_POSITIVE = Bound(0, open_lo=True)  # > 0 (for ints: >= 1)
_ONE = Bound(1)                     # >= 1
_FRACTION = Bound(0, 1)             # 0..1, both included

# The range of every numeric field, checked by the loader (``path: must be ...``); a null
# where the type allows one is always accepted. tests/config/test_ranges.py fails when a
# numeric field has no entry here: a new number needs its range decided. Where 0 means
# something it is said; elsewhere the range is what keeps a config meaningful.
RANGES: dict[type, dict[str, Bound]] = {
    ServerConfig: {
        "port": Bound(0, 65535),           # 0: a port the OS picks (printed at start-up)
        "workers": _ONE,
        "keep_alive_s": _POSITIVE,
        "graceful_shutdown_s": _POSITIVE,
        "max_connections": _POSITIVE,      # null: what the open-file limit leaves
        "head_timeout_s": _POSITIVE, "body_timeout_s": _POSITIVE, "body_rate_grace_s": _NONNEG,
        "min_body_rate": _NONNEG,          # 0: no minimum rate (the deadlines still hold)
        "max_connections_per_client": _POSITIVE,   # null: no cap
    },
    EdgeConfig: {"max_body_bytes": _POSITIVE, "max_header_bytes": _POSITIVE, "max_headers": _POSITIVE},
    MemosConfig: {"max_bytes": _NONNEG},       # 0: no text remembered
    RouteConfig: {"max_body_bytes": _NONNEG},   # 0 or null: the edge's cap
    UpstreamConfig: {
        "connect_timeout_s": _POSITIVE, "read_timeout_s": _POSITIVE, "health_timeout_s": _POSITIVE,
        "pool_size": _POSITIVE,
        "pool_timeout_s": _NONNEG,         # 0: fail at once when every connection is busy
        "idle_timeout_s": _NONNEG,         # 0: an idle connection is never reused
        "health_ttl_s": _NONNEG,           # 0: probed on every /readyz
        "answer_bytes_per_token": _POSITIVE, "answer_slack_bytes": _NONNEG,
        "max_attempts": _ONE, "eject_after": _ONE, "eject_base_s": _POSITIVE, "eject_max_s": _POSITIVE,
        "health_interval_s": _POSITIVE,
        "queue_timeout_ms": _NONNEG,       # 0: a pool with every target at its cap refuses at once
        "affinity_slack": _NONNEG,         # 0: a prefix stays only on a target as idle as the least loaded
    },
    TargetConfig: {"weight": Bound(1, 1000), "max_inflight_requests": _ONE, "max_inflight_tokens": _ONE},
    ModelConfig: {"context_window": _POSITIVE, "input_price_per_million": _NONNEG,
                  "output_price_per_million": _NONNEG},
    # Plan limits: >= 0, where 0 allows none of it (max_tools: 0 = no tools), except the
    # three budget-limits/limits.py reads as "no limit" at 0: tokens_per_minute,
    # requests_per_minute, max_concurrent_streams.
    PlanConfig: {
        **dict.fromkeys(("max_context_tokens", "max_output_tokens", "tokens_per_minute", "max_concurrent_streams",
                         "max_outer_items", "max_messages", "max_content_parts", "max_stop", "max_tools",
                         "max_request_work", "requests_per_minute", "max_part_chars", "max_logit_bias",
                         "max_schema_bytes", "max_schema_depth", "max_attachment_bytes",
                         "structured_output_surcharge", "attachment_surcharge", "restricted_max_output_tokens"),
                        _NONNEG),
        "max_n": _ONE,                     # n defaults to 1: 0 would refuse every request
        "default_max_tokens": _ONE,        # null: max_tokens is required
        "max_best_of": _NONNEG,            # 0 counts as 1 (best_of 1 needs no permission)
        "daily_spend_usd": _NONNEG,        # null: no cap; 0: nothing may be spent
        "monthly_spend_usd": _NONNEG,
        "cache_ttl_seconds": _NONNEG,      # 0 or null: the cache section's TTL
        # null is "no limit" for these; 0 would refuse every request, unlike tokens_per_minute: 0
        "spend_per_minute_usd": _POSITIVE,
        "max_inflight_tokens": _ONE,
        "key_tokens_per_minute": _ONE,
        "key_requests_per_minute": _ONE,
        "max_job_tokens": _ONE, "jobs_per_minute": _ONE, "max_job_seconds": _POSITIVE, "max_job_usd": _POSITIVE,
        "max_open_jobs": _NONNEG,          # 0: this plan creates no jobs
    },
    StoreConfig: {
        "timeout_ms": _POSITIVE, "lease_s": _POSITIVE, "breaker_failures": _ONE,
        "fail_open_fraction": Bound(0, 1, open_lo=True),   # a share of each limit; 1: all of it
    },
    CapacityConfig: {"tokens_per_minute": _POSITIVE},     # shares: checked by the loader (0 < share < 1)
    KeystoreConfig: {
        "cache_ttl_s": _NONNEG,            # 0: every request reads the key store
        "last_used_flush_s": _POSITIVE,
    },
    JwtIssuerConfig: {
        "jwks_ttl_s": _POSITIVE, "fetch_timeout_s": _POSITIVE,
        "jwks_min_refetch_s": _NONNEG,     # 0: an unknown kid may refetch every time
        "leeway_s": _NONNEG,
    },
    StreamConfig: {"max_duration_s": _POSITIVE, "idle_timeout_s": _POSITIVE},
}

RANGES.update(abuse_ranges(Bound))
RANGES.update(content_ranges(Bound))

DEFAULT_ROUTES: tuple[RouteConfig, ...] = (
    RouteConfig(path="/v1/chat/completions"),
    RouteConfig(path="/v1/completions"),
    RouteConfig(path="/v1/embeddings"),
    RouteConfig(path="/v1/models", methods=("GET",), content_types=()),
    # agents' own APIs (docs/dialects.md)
    RouteConfig(path="/v1/responses"),
    RouteConfig(path="/v1/messages"),
    RouteConfig(path="/v1/messages/count_tokens"),
)
