"""``tokenward tenants ...`` and ``tokenward abuse ...``: operator controls from the command
line, the same operations as the admin API, each audited.

    tenants pause T CAPABILITY --for D --reason R [--reviewer W]    CAPABILITY: tools, streaming,
    tenants resume T CAPABILITY --reason R [--reviewer W]                       model:NAME, all
    tenants cancel-streams T --reason R [--reviewer W]
    tenants controls [T] [--history] [--json]
    abuse act ACTION (KEY | --tenant T) [--for D] --reason R [--concurrency N] [--max-output-tokens N]
    abuse reinstate (KEY | --tenant T) --reason R [--reviewer W] [--appeal none|upheld|overturned]
    abuse exempt (KEY | --tenant T) --for D --reason R [--reviewer W]
    abuse unexempt (KEY | --tenant T) --reason R [--reviewer W]

``--config F`` (or ``TOKENWARD_CONFIG``) names the gateway's config: the change goes to its key
store's database, and running gateways hear of it at once over Redis when the config names a
Redis store (else within ``control.poll_s``). Exit 2: a request that cannot be done as asked;
exit 1: the key store or Redis could not be reached.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, TypeVar

import typer

from .options import config_option
from .keys import _config, _fail, _key_id, _print_json_lines, _redact, _reviewer, _seconds

if TYPE_CHECKING:
    from ..config.schema import Config
    from ..control.model import Control
    from ..control.service import ControlOps

T = TypeVar("T")

tenants_app = typer.Typer(no_args_is_help=True, add_completion=False,
                          help="Pause and resume a tenant's capabilities, cancel its open streams (audited).")
abuse_app = typer.Typer(no_args_is_help=True, add_completion=False,
                        help="Abuse actions: apply, reinstate (with the appeal outcome), exempt (audited).")

_CONFIG = config_option("the gateway's YAML config (default: $TOKENWARD_CONFIG)")
_REASON = typer.Option(..., "--reason", help="why (recorded in the audit trail)")
_REVIEWER = typer.Option(None, "--reviewer", help="who decided it (default: the current user)")
_TENANT = typer.Option(None, "--tenant", help="the tenant as a whole (instead of a key)")


def _run(config_path: Path, action: Callable[[ControlOps, Config], Awaitable[T]]) -> T:
    """Open the key store's database, run ``action(ops, config)``, close it."""
    from sqlalchemy.exc import SQLAlchemyError

    from ..control.model import ControlError
    from ..control.repo import ControlRepo
    from ..control.runtime import CHANNEL
    from ..control.service import ControlOps
    from ..keys.invalidate import is_redis_url, publish_change
    from ..keys.store import open_keystore

    cfg = _config(config_path)

    async def announce(kind: str, control: Control) -> int:
        if not is_redis_url(cfg.store.url):
            return 0
        message = (f"cancel:{control.id}:{control.created_at!r}:{control.tenant}" if kind == "cancel_streams"
                   else "changed")
        return await publish_change(cfg.store.url, message, channel=CHANNEL)

    async def main() -> T:
        store = await open_keystore(cfg.keystore.url)
        try:
            repo = ControlRepo(store.engine)
            await repo.create_table()
            ops = ControlOps(repo, announce, frozenset(cfg.tenants), frozenset(cfg.models),
                             cfg.abuse.appeal_grace_s if cfg.abuse is not None else 0.0)
            ops.keys = store
            return await action(ops, cfg)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except ControlError as exc:
        raise _fail(str(exc), 2) from None
    except (OSError, ConnectionError, SQLAlchemyError) as exc:
        raise _fail(f"key store {_redact(cfg.keystore.url)} or its Redis unavailable: "
                    f"{exc.__class__.__name__}: {exc}") from None
    except Exception as exc:
        if exc.__class__.__module__.startswith("redis"):
            raise _fail(f"Redis {_redact(cfg.store.url)} unavailable: {exc}") from None
        raise


def _when(ts: float | None) -> str:
    return "until cleared" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _heard(ops: ControlOps) -> str:
    return f"{ops.heard} gateway process(es) heard it" if ops.heard else "gateways apply it within control.poll_s"


@tenants_app.command()
def pause(tenant: str = typer.Argument(..., metavar="T"),
          capability: str = typer.Argument(..., metavar="CAPABILITY", help="tools, streaming, model:NAME or all"),
          for_: str = typer.Option(..., "--for", help="how long, e.g. 15m, 1h, 2d"),
          reason: str = _REASON, reviewer: Optional[str] = _REVIEWER, config: Path = _CONFIG) -> None:
    """Pause a capability for a tenant for a duration: refused with capability_paused."""
    seconds = _seconds(for_, "--for")

    async def action(ops: ControlOps, _cfg: Config) -> tuple[Control, str]:
        return await ops.pause(tenant, capability, seconds, reason, _reviewer(reviewer)), _heard(ops)

    control, heard = _run(config, action)
    print(f"paused {control.capability} for tenant {tenant} until {_when(control.until)} "
          f"(control {control.id}; {heard})")


@tenants_app.command()
def resume(tenant: str = typer.Argument(..., metavar="T"),
           capability: str = typer.Argument(..., metavar="CAPABILITY", help="tools, streaming, model:NAME or all"),
           reason: str = _REASON, reviewer: Optional[str] = _REVIEWER, config: Path = _CONFIG) -> None:
    """Resume a paused capability now."""

    async def action(ops: ControlOps, _cfg: Config) -> tuple[list[Control], str]:
        return await ops.resume(tenant, capability, reason, _reviewer(reviewer)), _heard(ops)

    cleared, heard = _run(config, action)
    print(f"resumed {capability} for tenant {tenant} ({len(cleared)} pause(s) cleared; {heard})")


@tenants_app.command("cancel-streams")
def cancel_streams(tenant: str = typer.Argument(..., metavar="T"), reason: str = _REASON,
                   reviewer: Optional[str] = _REVIEWER, config: Path = _CONFIG) -> None:
    """End the tenant's open streams on every replica (backends cancelled, reservations settled)."""

    async def action(ops: ControlOps, _cfg: Config) -> tuple[Control, str]:
        return await ops.cancel_streams(tenant, reason, _reviewer(reviewer)), _heard(ops)

    control, heard = _run(config, action)
    print(f"cancelled tenant {tenant}'s open streams (control {control.id}; {heard})")


@tenants_app.command()
def controls(tenant: Optional[str] = typer.Argument(None, metavar="[T]"), config: Path = _CONFIG,
             history: bool = typer.Option(False, "--history", help="the latest 200, cleared and ended too"),
             as_json: bool = typer.Option(False, "--json", help="one JSON object per line")) -> None:
    """The controls in force: abuse actions, pauses, exemptions."""

    async def action(ops: ControlOps, _cfg: Config) -> list[Control]:
        rows = await (ops.repo.history(tenant) if history else ops.repo.active())
        return [r for r in rows if tenant is None or r.tenant == tenant]

    now = time.time()
    rows = [c.public(now) for c in _run(config, action)]
    if as_json:
        _print_json_lines(rows)
        return
    if not rows:
        scope = f" for tenant {tenant}" if tenant is not None else ""
        print(f"no controls{scope} {'recorded' if history else 'in force'} "
              "(no abuse actions, pauses or exemptions)")
        return
    for row in rows:
        what = row["kind"] + (f" {row['capability']}" if row["capability"] else "") + (" (shadow)" if row["shadow"] else "")
        by = f"automatic, rule {row['rule']}" if row["automatic"] else row["by"]
        state = "in force" if row["active"] else "ended"
        print(f"{row['id']:>5}  {what:<28} {row['scope']:<32} {state:<8} until {_when(row['until'])}  "
              f"by {by}  reason: {row['reason']}")


def _subject(ident: Optional[str], tenant: Optional[str]) -> tuple[str | None, str | None]:
    if (ident is None) == (tenant is None):
        raise _fail("name a key (id or whole key) or --tenant T, not both", 2)
    if ident is None:
        return tenant, None
    return None, ident if ident.startswith("jwt:") else _key_id(ident)


async def _tenant_of(ops: ControlOps, tenant: str | None, key_id: str | None) -> str:
    if tenant is not None:
        return tenant
    # _run hands every action a key store, and _subject names a key whenever it names no tenant
    assert ops.keys is not None and key_id is not None
    record = await ops.keys.get(key_id)
    if record is None:
        from ..control.model import ControlError

        raise ControlError(f"no key with id {key_id}")
    return record.tenant


@abuse_app.command()
def act(action_name: str = typer.Argument(..., metavar="ACTION",
                                          help="record, review, reduce_concurrency, restrict or suspend"),
        ident: Optional[str] = typer.Argument(None, metavar="[KEY]"), tenant: Optional[str] = _TENANT,
        for_: Optional[str] = typer.Option(None, "--for", help="how long (default: until reinstated)"),
        concurrency: Optional[int] = typer.Option(None, "--concurrency", help="reduce_concurrency: open requests"),
        max_output: Optional[int] = typer.Option(None, "--max-output-tokens", help="restrict: the output cap"),
        reason: str = _REASON, reviewer: Optional[str] = _REVIEWER, config: Path = _CONFIG) -> None:
    """Apply an abuse action by hand (the engine applies the same ones automatically)."""
    tenant_name, key_id = _subject(ident, tenant)
    seconds = _seconds(for_, "--for") if for_ else None
    params = {k: v for k, v in (("concurrency", concurrency), ("max_output_tokens", max_output)) if v is not None}

    async def action(ops: ControlOps, _cfg: Config) -> tuple[Control, str]:
        owner = await _tenant_of(ops, tenant_name, key_id)
        return await ops.act(action_name, owner, key_id, seconds, reason, by=_reviewer(reviewer),
                             params=params or None), _heard(ops)

    control, heard = _run(config, action)
    print(f"{control.kind} on {control.scope} until {_when(control.until)} (control {control.id}; {heard})")


@abuse_app.command()
def reinstate(ident: Optional[str] = typer.Argument(None, metavar="[KEY]"), tenant: Optional[str] = _TENANT,
              appeal: str = typer.Option("none", "--appeal", help="none, upheld or overturned"),
              reason: str = _REASON, reviewer: Optional[str] = _REVIEWER, config: Path = _CONFIG) -> None:
    """Clear every abuse action on a key (or a tenant), recording the appeal outcome."""
    tenant_name, key_id = _subject(ident, tenant)

    async def action(ops: ControlOps, _cfg: Config) -> tuple[list[Control], str]:
        return await ops.reinstate(tenant_name, key_id, reason, _reviewer(reviewer), appeal), _heard(ops)

    cleared, heard = _run(config, action)
    kinds = ", ".join(sorted({c.kind for c in cleared if c.cleared_at is not None}))
    grace = [c for c in cleared if c.cleared_at is None]
    after = f"; exempt from automatic actions until {_when(grace[0].until)}" if grace else ""
    print(f"reinstated {cleared[0].scope}: cleared {kinds}; appeal {appeal}{after} ({heard})")


@abuse_app.command()
def exempt(ident: Optional[str] = typer.Argument(None, metavar="[KEY]"), tenant: Optional[str] = _TENANT,
           for_: str = typer.Option(..., "--for", help="until when, e.g. 30d"),
           reason: str = _REASON, reviewer: Optional[str] = _REVIEWER, config: Path = _CONFIG) -> None:
    """Exempt a key or a tenant from automatic actions until an expiry (signals still recorded)."""
    tenant_name, key_id = _subject(ident, tenant)
    seconds = _seconds(for_, "--for")

    async def action(ops: ControlOps, _cfg: Config) -> tuple[Control, str]:
        owner = await _tenant_of(ops, tenant_name, key_id)
        return await ops.exempt(owner, key_id, seconds, reason, _reviewer(reviewer)), _heard(ops)

    control, heard = _run(config, action)
    print(f"exempted {control.scope} until {_when(control.until)} (control {control.id}; {heard})")


@abuse_app.command()
def unexempt(ident: Optional[str] = typer.Argument(None, metavar="[KEY]"), tenant: Optional[str] = _TENANT,
             reason: str = _REASON, reviewer: Optional[str] = _REVIEWER, config: Path = _CONFIG) -> None:
    """End an exemption now."""
    tenant_name, key_id = _subject(ident, tenant)

    async def action(ops: ControlOps, _cfg: Config) -> tuple[list[Control], str]:
        owner = await _tenant_of(ops, tenant_name, key_id)
        return await ops.unexempt(owner, key_id, reason, _reviewer(reviewer)), _heard(ops)

    cleared, heard = _run(config, action)
    print(f"ended the exemption of {cleared[0].scope} ({heard})")

