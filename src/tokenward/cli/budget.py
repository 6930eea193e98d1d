"""``tokenward budget show``: what a tenant's budgets hold now.

With a Redis store (``store.url`` or ``TOKENWARD_STORE_URL``) it reads the shared store
itself: a namespace's values are packed in one hash (docs/budget.md), which ``redis-cli``
cannot show in units an operator thinks in. With the in-memory store the budgets live inside
the gateway process, so it asks the running gateway's admin API (``GET
/admin/budget/{tenant}``, with the token from ``admin.token_env``) for the same report.
``--key ID`` adds the key's limits: the plan's per-key ones and the key's own.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from .options import config_option

if TYPE_CHECKING:
    from ..config.key_limits import KeyLimits
    from ..config.schema import Config, PlanConfig

budget_app = typer.Typer(no_args_is_help=True,
                         help="Read a tenant's budgets: from the shared Redis, or from the running gateway.")


def _line(row: dict[str, Any]) -> str:
    from ..budget.policy import usd_text

    shadow = "" if row["enforced"] else "  (shadow)"
    if row["kind"] == "rate":
        return (f"  {row['limit']:<18}{row['available']:>14,} of {row['capacity']:,} {row['unit']} available"
                f" ({row['per_minute']:,}/min; full in {row['full_in_ms'] / 1000:.1f} s){shadow}")
    if row["kind"] == "gauge":
        return f"  {row['limit']:<18}{row['held']:>14,} of {row['limit_value']:,} {row['unit']} held{shadow}"
    return f"  {row['limit']:<18}{usd_text(row['spent']):>14} of {usd_text(row['cap'])} spent{shadow}"


async def _key_limits(cfg: Config, key_id: str | None) -> KeyLimits | None:
    """The key's own limits, from the key store (None without --key, or for a key without any)."""
    if key_id is None:
        return None
    from ..keys.store import open_keystore

    store = await open_keystore(cfg.keystore.url)
    try:
        record = await store.get(key_id)
    finally:
        await store.close()
    return record.limits() if record is not None else None


async def _read(cfg: Config, tenant: str, plan: PlanConfig, key_id: str | None) -> dict[str, Any]:
    from ..budget.limits import Budgets
    from ..budget.report import budget_report
    from ..budget.opening import open_store

    limits = await _key_limits(cfg, key_id)
    store = open_store(cfg)
    now_ms = int(time.time() * 1000)
    try:
        return await budget_report(store, Budgets(cfg).tenant(tenant, plan, key_id, now_ms, limits),
                                   tenant, key_id, now_ms)
    finally:
        await store.close()


def _gateway_url(cfg: Config) -> str:
    host = cfg.server.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"     # listening everywhere: this machine answers on loopback
    scheme = "https" if getattr(cfg.server, "tls", None) else "http"
    return f"{scheme}://{'[' + host + ']' if ':' in host else host}:{cfg.server.port}"


def _ask_gateway(cfg: Config, tenant: str, key_id: str | None, url: str | None) -> dict[str, Any]:
    """The report from the running gateway's admin API; a clear line and exit 1 if it cannot be had."""
    import urllib.error
    import urllib.parse
    import urllib.request

    env = cfg.admin.token_env
    token = os.environ.get(env, "") if env else ""
    if not token:
        why = (f"admin.token_env names {env}, which is not set here" if env
               else "the config has no admin.token_env")
        raise _fail("store.url is memory: the budgets live inside the gateway process, and budget show asks the "
                    f"running gateway's admin API for them, but {why} (set it to the gateway's admin token, or "
                    "point store.url / TOKENWARD_STORE_URL at the shared Redis)")
    base = (url or _gateway_url(cfg)).rstrip("/")
    query = "?" + urllib.parse.urlencode({"key": key_id}) if key_id else ""
    request = urllib.request.Request(f"{base}/admin/budget/{urllib.parse.quote(tenant, safe='')}{query}",
                                     headers={"authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            report: dict[str, Any] = json.loads(reply.read())
            return report
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read())["error"]["message"]
        except Exception:
            message = f"HTTP {exc.code}"
        raise _fail(f"the gateway at {base} refused: {message}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _fail(f"store.url is memory, and no gateway answered at {base} ({reason}): budget show reads an "
                    "in-memory store through the running gateway (--gateway URL if it listens elsewhere)") from None


def _fail(message: str) -> typer.Exit:
    print(message, file=sys.stderr)
    return typer.Exit(1)


@budget_app.command("show")
def show(
    config: Path = config_option(),
    tenant: str = typer.Option(..., "--tenant", help="a tenant of the config"),
    key_id: Optional[str] = typer.Option(None, "--key", help="a key id: adds the key's limits (the plan's "
                                         "per-key ones and the key's own)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object instead of a table"),
    gateway: Optional[str] = typer.Option(None, "--gateway", help="with store.url memory: the running gateway's "
                                          "URL (default: from server.host and server.port)"),
) -> None:
    """What a tenant's budgets hold now: tokens available, open streams, spend."""
    from ..budget.store import StoreUnavailable
    from ..config import load_config
    from ..config.loader import effective_plan
    from ..errors import ConfigError

    try:
        cfg = load_config(config)
    except ConfigError as exc:
        print(f"{config}: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    if tenant not in cfg.tenants:
        print(f"{config}: no tenant {tenant!r} (tenants: {', '.join(sorted(cfg.tenants)) or 'none'})", file=sys.stderr)
        raise typer.Exit(2)
    if cfg.store.url == "memory":
        report = _ask_gateway(cfg, tenant, key_id, gateway)
    else:
        try:
            report = asyncio.run(_read(cfg, tenant, effective_plan(cfg, tenant), key_id))
        except StoreUnavailable as exc:
            raise _fail(str(exc)) from None
    if as_json:
        print(json.dumps(report))
        return
    key = f", key {key_id}" if key_id else ""
    print(f"tenant {tenant} ({cfg.tenants[tenant].plan}{key}), {report['namespace']}, at {report['at']}")
    for row in report["limits"]:
        print(_line(row))
    print(f"  open reservations: {report['open_reservations']}")
