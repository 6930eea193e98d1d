"""From what the store answers for a subject to the named signals a policy reads (pure)."""

from __future__ import annotations

from ..config.abuse import AbuseConfig
from .state import Params, Raw


def params_of(config: AbuseConfig) -> Params:
    return Params(retention_s=int(config.retention_days * 86400), baseline_days=config.baseline_days,
                  min_history_s=int(config.min_history_days * 86400), novelty_s=int(config.novelty_s),
                  refusal_minutes=max(1, int(config.refusal_window_s // 60)), max_networks=config.max_networks,
                  max_capabilities=config.max_capabilities)


def signals(raw: Raw, config: AbuseConfig, campaign: tuple[int, int] = (0, 0)) -> dict[str, float]:
    """Every signal of ``config.abuse.SIGNALS`` for one subject. Without ``min_history_days``
    of history there is no baseline: the ratio reads 0 (no opinion, not "normal")."""
    baseline = raw.baseline_sum / raw.baseline_days if raw.baseline_days else 0.0
    ratio = raw.hour_output / max(baseline, config.min_baseline_tokens) if raw.trusted else 0.0
    share = raw.hour_at_max / raw.hour_requests if raw.hour_requests >= config.min_requests else 0.0
    return {
        "output_ratio": round(ratio, 3),
        "max_output_share": round(share, 3),
        "new_network": float(raw.hour_new_network),
        "new_capability": float(raw.hour_new_capability),
        "refusals": float(raw.refusals),
        "campaign_keys": float(campaign[0]),
        "campaign_tenants": float(campaign[1]),
        "hour_output_tokens": float(raw.hour_output),
        "hour_requests": float(raw.hour_requests),
        "baseline_tokens": round(baseline, 1),
    }
