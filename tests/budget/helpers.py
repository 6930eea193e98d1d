"""Small builders for budget tests."""

from __future__ import annotations

from tokenward.budget import policy
from tokenward.budget.policy import BUCKET, COST, GAUGE, REQUEST, SCALE, SLOT, SOFT, SPEND, TOKENS, Check
from tokenward.budget.store import Layout, ReserveCall, SettleCall

NS = "tw:{t:test}"


def bucket(name: str, per_minute: int, unit: str = TOKENS, enforce: int = 1, ns: str = NS) -> Check:
    return Check(f"{ns}:b:{name}", BUCKET, unit, per_minute * SCALE, per_minute, enforce)


def soft(name: str, per_minute: int, ns: str = NS) -> Check:
    return Check(f"{ns}:c:{name}", SOFT, TOKENS, per_minute * SCALE, per_minute, 1)


def gauge(name: str, limit: int, unit: str = SLOT, enforce: int = 1, ns: str = NS) -> Check:
    return Check(f"{ns}:g:{name}", GAUGE, unit, limit, 0, enforce)


def spend(name: str, cap: int, expires_ms: int, enforce: int = 1, ns: str = NS) -> Check:
    # named like limits.py's spend keys: the period last
    return Check(f"{ns}:s:{name}:{expires_ms}", SPEND, COST, cap, expires_ms, enforce)


def reserve(layout: Layout, rid: str, now_ms: int, amounts: list[int], lease_ms: int = 30_000) -> ReserveCall:
    return ReserveCall(layout, rid, now_ms, now_ms + lease_ms, amounts)


def settle(layout: Layout, rid: str, now_ms: int, tokens: int = 0, cost: int = 0,
           mode: str = policy.SETTLE) -> SettleCall:
    return SettleCall(layout.leases_key, rid, layout.record_key(rid), layout.keys, now_ms, tokens, cost, mode, layout)


__all__ = ["bucket", "soft", "gauge", "spend", "reserve", "settle", "NS", "SCALE", "REQUEST", "COST", "TOKENS"]
