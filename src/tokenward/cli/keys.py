"""``tokenward keys ...``: the key lifecycle from the command line.

    keys create --config F --tenant T [--name N] [--models a,b] [--expires-in 30d]
                [--daily-spend-usd X] [--monthly-spend-usd X] [--tokens-per-minute N]
    keys list --config F [--tenant T] [--json]
    keys revoke ID --config F --reason R [--reviewer W]
    keys suspend ID --for 1h --config F --reason R [--reviewer W]
    keys reinstate ID --config F --reason R [--reviewer W]
    keys audit [ID] --config F [--json]

ID is a key id or a whole key (say, a leaked key found in a log). ``create`` prints the
plaintext key, once, as the only line on stdout. Changes are announced to running
gateways over Redis when the config names a Redis store.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Optional, Sequence, TypeVar

import typer

from ..config.stores import Store, failure, redact_url
from .options import config_option

if TYPE_CHECKING:
    from ..config.schema import Config
    from ..keys.model import KeyRecord
    from ..keys.service import KeyService

T = TypeVar("T")

keys_app = typer.Typer(no_args_is_help=True, add_completion=False,
                       help="Create, list, revoke, suspend and reinstate API keys (each change is audited).")

_CONFIG = config_option()
_REASON = typer.Option(..., "--reason", help="why (recorded in the audit trail)")
_REVIEWER = typer.Option(None, "--reviewer", help="who approved it (default: the current user)")


def _fail(message: str, code: int = 1) -> typer.Exit:
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(code)


def _config(path: Path) -> Config:
    from ..config import load_config
    from ..errors import ConfigError

    try:
        return load_config(path)
    except ConfigError as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None


def _reviewer(value: str | None) -> str:
    if value:
        return value
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:
        return "cli"


def _run(config_path: Path, action: Callable[[KeyService, Config], Awaitable[T]]) -> T:
    """Open the configured key store, run ``action(service, config)``, close the store."""
    from sqlalchemy.exc import SQLAlchemyError

    from ..keys.invalidate import is_redis_url, publish_change
    from ..keys.model import KeyStoreError
    from ..keys.service import KeyService
    from ..keys.store import open_keystore

    cfg = _config(config_path)

    async def announce(key_id: str) -> None:
        if is_redis_url(cfg.store.url):
            await publish_change(cfg.store.url, key_id)

    async def main() -> T:
        store = await open_keystore(cfg.keystore.url)
        try:
            return await action(KeyService(store, announce), cfg)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except KeyStoreError as exc:
        raise _fail(str(exc)) from None
    except (OSError, ConnectionError, SQLAlchemyError) as exc:
        raise _fail(failure(Store("key store", cfg.keystore.url), exc)) from None   # as serve says it


def _redact(url: str) -> str:
    """A database URL without its password, fit for an error message."""
    return redact_url(url)


def _key_id(ident: str) -> str:
    from ..keys.format import key_id_of

    key_id = key_id_of(ident)
    if key_id is None:
        raise _fail(f"{ident[:24]!r}... is neither a key id nor a key", 2)
    return key_id


def _seconds(text: str, option: str) -> float:
    from ..keys.model import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise _fail(f"{option}: {exc}", 2) from None


def _listed(values: list[str] | None) -> list[str] | None:
    """``--models a,b --models c`` -> [a, b, c]: every occurrence counts, none is dropped
    (a name given twice is kept once)."""
    if values is None:
        return None
    return list(dict.fromkeys(item.strip() for value in values for item in value.split(",") if item.strip()))


@keys_app.command()
def create(
    config: Path = _CONFIG,
    tenant: str = typer.Option(..., "--tenant", help="the tenant the key acts as"),
    name: Optional[str] = typer.Option(None, "--name", help="owner or purpose"),
    models: Optional[list[str]] = typer.Option(
        None, "--models", help="models, comma-separated or the option repeated (default: the plan's)"),
    expires_in: Optional[str] = typer.Option(None, "--expires-in", help="e.g. 30d, 12h (default: never)"),
    environments: Optional[list[str]] = typer.Option(
        None, "--environments", help="environments, comma-separated or the option repeated"),
    reason: Optional[str] = typer.Option(None, "--reason", help="recorded in the audit trail"),
    reviewer: Optional[str] = _REVIEWER,
    daily_spend_usd: Optional[float] = typer.Option(
        None, "--daily-spend-usd", help="the key's own spend cap per UTC day, below its plan's"),
    monthly_spend_usd: Optional[float] = typer.Option(
        None, "--monthly-spend-usd", help="the key's own spend cap per UTC month, below its plan's"),
    tokens_per_minute: Optional[int] = typer.Option(
        None, "--tokens-per-minute", help="the key's own token rate, below its plan's"),
) -> None:
    """Create a key; prints the key once (the only line on stdout). Only its hash is stored.
    A key's own limits are drawn on with its plan's, in the same atomic reservation."""
    from ..config.key_limits import key_limits
    from ..keys.service import check_new_key

    model_list = _listed(models)
    env_list = _listed(environments) or None
    ttl = _seconds(expires_in, "--expires-in") if expires_in else None
    try:
        limits = key_limits({"daily_spend_usd": daily_spend_usd, "monthly_spend_usd": monthly_spend_usd,
                             "tokens_per_minute": tokens_per_minute})
    except ValueError as exc:
        raise _fail("--" + str(exc).replace("_", "-", 2), 2) from None

    async def action(keys: KeyService, cfg: Config) -> tuple[str, KeyRecord]:
        check_new_key(cfg, tenant, model_list, limits)
        expires_at = time.time() + ttl if ttl is not None else None
        return await keys.create(tenant, name=name, models=model_list, environments=env_list,
                                 expires_at=expires_at, reason=reason, reviewer=_reviewer(reviewer), limits=limits)

    plaintext, record = _run(config, action)
    sys.stdout.write(plaintext + "\n")
    sys.stdout.flush()
    print(f"created key {record.id} for tenant {record.tenant}; it will not be shown again", file=sys.stderr)


@keys_app.command("list")
def list_keys(
    config: Path = _CONFIG,
    tenant: Optional[str] = typer.Option(None, "--tenant", help="only this tenant's keys"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per line"),
) -> None:
    """List keys (ids, never secrets) with their state as of now."""

    async def action(keys: KeyService, _cfg: Config) -> list[KeyRecord]:
        return await keys.list(tenant)

    records = _run(config, action)
    now = time.time()
    rows = [r.public(now) for r in records]
    if as_json:
        _print_json_lines(rows)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "tenant", "name", "state", "models", "own limits", "expires", "last used", box=None)
    for row in rows:
        table.add_row(row["id"], row["tenant"], row["name"] or "", _state(row),
                      ",".join(row["models"]) if row["models"] is not None else "(plan)", _own_limits(row),
                      _when(row["expires_at"]), _when(row["last_used_at"]))
    Console(width=160).print(table)


@keys_app.command()
def revoke(ident: str = typer.Argument(..., metavar="ID", help="key id or whole key"),
           config: Path = _CONFIG, reason: str = _REASON, reviewer: Optional[str] = _REVIEWER) -> None:
    """Revoke a key: refused everywhere within a second."""
    key_id = _key_id(ident)
    record = _run(config, lambda keys, _c: keys.revoke(key_id, reason=reason, reviewer=_reviewer(reviewer)))
    print(f"revoked key {record.id} (tenant {record.tenant})")


@keys_app.command()
def suspend(ident: str = typer.Argument(..., metavar="ID", help="key id or whole key"),
            config: Path = _CONFIG,
            for_: str = typer.Option(..., "--for", help="how long, e.g. 1h, 30m, 2d"),
            reason: str = _REASON, reviewer: Optional[str] = _REVIEWER) -> None:
    """Suspend a key for a duration; it works again afterwards, or after reinstate."""
    key_id = _key_id(ident)
    seconds = _seconds(for_, "--for")
    record = _run(config, lambda keys, _c: keys.suspend(key_id, duration_s=seconds, reason=reason,
                                                        reviewer=_reviewer(reviewer)))
    print(f"suspended key {record.id} (tenant {record.tenant}) until {_when(record.suspended_until)}")


@keys_app.command()
def reinstate(ident: str = typer.Argument(..., metavar="ID", help="key id or whole key"),
              config: Path = _CONFIG, reason: str = _REASON, reviewer: Optional[str] = _REVIEWER) -> None:
    """Reinstate a suspended or revoked key."""
    key_id = _key_id(ident)
    record = _run(config, lambda keys, _c: keys.reinstate(key_id, reason=reason, reviewer=_reviewer(reviewer)))
    print(f"reinstated key {record.id} (tenant {record.tenant})")


@keys_app.command()
def audit(ident: Optional[str] = typer.Argument(None, metavar="[ID]", help="only this key"),
          config: Path = _CONFIG,
          as_json: bool = typer.Option(False, "--json", help="one JSON object per line")) -> None:
    """Show the audit trail: action, reason, scope, duration, reviewer, time."""
    key_id = _key_id(ident) if ident is not None else None
    records = _run(config, lambda keys, _c: keys.audit(key_id))
    import msgspec

    rows = [msgspec.structs.asdict(r) for r in records]
    if as_json:
        _print_json_lines(rows)
        return
    for row in rows:
        duration = f" for {row['duration_s']:g}s" if row["duration_s"] is not None else ""
        appeal = (row["detail"] or {}).get("appeal")   # an abuse action's reinstatement (cli/controls.py)
        print(f"{_when(row['at'])}  {row['action']:<9} {row['scope']}{duration}  "
              f"reviewer={row['reviewer'] or '-'}  reason={row['reason'] or '-'}" + (f"  appeal={appeal}" if appeal else ""))


def _print_json_lines(rows: Sequence[Mapping[str, object]]) -> None:
    import msgspec

    out = sys.stdout.buffer
    for row in rows:
        out.write(msgspec.json.encode(row) + b"\n")
    out.flush()


def _own_limits(row: dict[str, Any]) -> str:
    from ..budget.policy import micro_usd, usd_text

    out = [f"{usd_text(micro_usd(row[name]))}/{period}" for name, period in
           (("daily_spend_usd", "day"), ("monthly_spend_usd", "month")) if row.get(name) is not None]
    if row.get("tokens_per_minute") is not None:
        out.append(f"{row['tokens_per_minute']:,} tokens/min")
    return ", ".join(out) or "(plan)"


def _state(row: dict[str, Any]) -> str:
    if row["state"] == "suspended" and row["suspended_until"] is not None:
        return f"suspended until {_when(row['suspended_until'])}"
    return str(row["state"])


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
