"""The config of abuse signals and their graduated actions (``abuse:``), and of operator
controls (``control:``); docs/abuse.md explains each field.

    abuse:
      shadow: true                 # decide and record every would-be action, never act
      network_header: x-forwarded-for   # only behind a proxy that sets it; else the peer address
      rules:
        - {name: stolen-key-reduce, when: {output_ratio: 4, new_network: 1},
           action: reduce_concurrency, concurrency: 1, duration_s: 3600}
        - {name: stolen-key-suspend, when: {output_ratio: 10, max_output_share: 0.8, new_network: 1},
           action: suspend, duration_s: 86400}

A rule fires when every signal it names is at or above its threshold. Signals are the
names in ``SIGNALS``; actions, from the mildest, are in ``ACTIONS``. A rule reads the
signals of each key, or (``subject: tenant``) of each tenant's traffic as a whole, and
acts on that key or tenant.
"""

from __future__ import annotations

from typing import Callable, Literal, TypeVar

import msgspec

# Each signal a rule may name, as the abuse engine computes it per key (and per tenant).
SIGNALS: dict[str, str] = {
    "output_ratio": "output tokens this hour / the subject's trailing peak-hour baseline",
    "max_output_share": "share of this hour's requests that asked for (nearly: 90%+) the plan's maximum output",
    "new_network": "requests this hour from a network prefix first seen within novelty_s",
    "new_capability": "requests this hour using a model or capability first seen within novelty_s",
    "refusals": "refused requests (429s, content_blocked, ...) within refusal_window_s",
    "campaign_keys": "distinct keys that sent a near-duplicate prompt within campaign.window_s",
    "campaign_tenants": "distinct tenants among those keys",
    "hour_output_tokens": "output tokens this hour",
    "hour_requests": "requests this hour",
}
# mildest first: an action is never replaced by a milder one while it lasts
ACTIONS = ("record", "review", "reduce_concurrency", "restrict", "suspend")
Action = Literal["record", "review", "reduce_concurrency", "restrict", "suspend"]


# Subclasses say frozen=True again: msgspec inherits it, but type checkers read structs
# through PEP 681 (dataclass_transform), where a subclass that does not say it is not frozen.
class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pass


class AbuseRule(_Strict, frozen=True):
    name: str
    when: dict[str, float]
    action: Action
    # whose signals the rule reads and whom its action is on: each key, or each tenant (all
    # its keys' traffic together; campaign signals are the largest of its keys')
    subject: Literal["key", "tenant"] = "key"
    duration_s: float = 3600.0
    concurrency: int = 1                 # reduce_concurrency: open requests the key keeps
    max_output_tokens: int = 256         # restrict: output clamped to this
    no_tools: bool = True                # restrict: requests naming tools refused (key_restricted)
    shadow: bool = False                 # this rule only records, whatever abuse.shadow says


class CampaignConfig(_Strict, frozen=True):
    enabled: bool = True
    num_perm: int = 64                   # MinHash permutations
    bands: int = 16                      # LSH bands (num_perm / bands rows each)
    shingle_words: int = 4
    min_chars: int = 40                  # shorter prompts are not sketched
    window_s: float = 3600.0
    max_members: int = 512               # keys remembered per band bucket
    max_prompts_per_batch: int = 64      # sketches computed per batch, at most (~0.3 ms each)


DEFAULT_RULES: tuple[AbuseRule, ...] = (
    AbuseRule(name="stolen-key-reduce", when={"output_ratio": 4.0, "new_network": 1.0},
              action="reduce_concurrency", concurrency=1, duration_s=3600.0),
    AbuseRule(name="stolen-key-suspend", when={"output_ratio": 10.0, "max_output_share": 0.8, "new_network": 1.0},
              action="suspend", duration_s=86400.0),
    AbuseRule(name="new-capability-at-max", when={"new_capability": 1.0, "max_output_share": 0.9, "output_ratio": 3.0},
              action="restrict", max_output_tokens=512, duration_s=3600.0),
    AbuseRule(name="hammering", when={"refusals": 300.0}, action="reduce_concurrency", concurrency=1,
              duration_s=900.0),
    AbuseRule(name="campaign", when={"campaign_keys": 20.0}, action="review", subject="tenant", duration_s=86400.0),
    AbuseRule(name="cross-tenant-campaign", when={"campaign_tenants": 3.0}, action="review", duration_s=86400.0),
)


class AbuseConfig(_Strict, frozen=True):
    shadow: bool = True
    # A header that carries the client's address, set by a proxy you trust (the first
    # address in it is used); None: the connection's peer address.
    network_header: str | None = None
    # The secret of the keyed hashes (network prefixes, prompt sketches); None: logging.hash_key_env.
    hash_key_env: str | None = None
    batch_s: float = 1.0                 # observations are sent to the store this often
    max_buffer: int = 50_000             # observations held between batches (more are dropped, counted)
    retention_days: float = 14.0
    baseline_days: int = 14
    min_history_days: float = 3.0        # below this, no baseline and no "new" network or capability
    min_baseline_tokens: int = 2000      # the baseline is never taken as less than this
    min_requests: int = 5                # max_output_share needs this many requests in the hour
    novelty_s: float = 3600.0
    refusal_window_s: float = 300.0
    max_networks: int = 32               # per key and tenant, least recently seen dropped first
    max_capabilities: int = 32
    sweep_s: float = 60.0
    # after a reinstatement whose appeal overturned the action, the key (or tenant) is
    # exempt from automatic actions this long (an audited exemption), so the signals of the
    # same hour do not bring the action straight back; 0: no grace
    appeal_grace_s: float = 86400.0
    campaign: CampaignConfig = CampaignConfig()
    rules: tuple[AbuseRule, ...] = DEFAULT_RULES

    def __post_init__(self) -> None:
        from ..errors import ConfigError

        if self.campaign.num_perm % self.campaign.bands:
            raise ConfigError("abuse.campaign.bands", f"must divide num_perm ({self.campaign.num_perm})")
        names: set[str] = set()
        for i, rule in enumerate(self.rules):
            if rule.name in names:
                raise ConfigError(f"abuse.rules[{i}].name", f"two rules are named {rule.name!r}")
            names.add(rule.name)
            if not rule.when:
                raise ConfigError(f"abuse.rules[{i}].when", "name at least one signal")
            for signal, threshold in rule.when.items():
                if signal not in SIGNALS:
                    raise ConfigError(f"abuse.rules[{i}].when.{signal}",
                                      f"unknown signal (one of {', '.join(SIGNALS)})")
                if threshold < 0:
                    raise ConfigError(f"abuse.rules[{i}].when.{signal}", "must be >= 0")


class ControlConfig(_Strict, frozen=True):
    """Operator controls and the replicated view of every action (docs/abuse.md)."""

    # How often each replica re-reads the active actions from the key store when the
    # change channel (Redis pub/sub) is live; without the channel, poll_s.
    refresh_s: float = 5.0
    poll_s: float = 1.0
    status_window_s: float = 300.0       # "refusals over the last minutes" on the status page


B = TypeVar("B")   # schema.Bound, passed in: schema imports this module, not the other way


def ranges(bound: Callable[..., B]) -> dict[type, dict[str, B]]:
    """This module's entries of ``schema.RANGES`` (``bound`` is ``schema.Bound``)."""
    nonneg, positive, one = bound(0), bound(0, open_lo=True), bound(1)
    return {
        AbuseRule: {"duration_s": positive, "concurrency": one, "max_output_tokens": nonneg},
        CampaignConfig: {"num_perm": bound(8, 1024), "bands": bound(1, 256), "shingle_words": bound(1, 32),
                         "min_chars": nonneg, "window_s": positive, "max_members": one,
                         "max_prompts_per_batch": nonneg},
        AbuseConfig: {"batch_s": positive, "max_buffer": one, "retention_days": positive,
                      "baseline_days": one, "min_history_days": nonneg, "min_baseline_tokens": one,
                      "min_requests": one, "novelty_s": positive, "refusal_window_s": bound(60, 600),
                      "max_networks": one, "max_capabilities": one, "sweep_s": positive,
                      "appeal_grace_s": nonneg},
        ControlConfig: {"refresh_s": positive, "poll_s": positive, "status_window_s": bound(60, 3600)},
    }
