"""``check-config --connect``: reach what plain check-config does not touch.

Each store the config opens (config/stores.py: key, budget, cache, abuse) gets one cheap
request, each upstream with a ``health_path`` the probe ``/readyz`` makes, and each JWT
issuer's JWKS URL a GET that must answer a key set. One line per
part on stdout when it answers; a part that does not is one line on stderr in the words a
failed ``serve`` uses (``cannot reach the key store at URL: why``, the password left out).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any
from urllib.error import HTTPError

from ..config.schema import Config, UpstreamConfig
from ..config.stores import Store, failure, redact_url, stores_of

_TIMEOUT_S = 5.0


def connect_check(cfg: Config) -> bool:
    """True when every store and upstream answered."""
    return asyncio.run(_check(cfg))


async def _check(cfg: Config) -> bool:
    stores = stores_of(cfg)
    store_results = await asyncio.gather(*(probe(store, cfg, _TIMEOUT_S) for store in stores))
    upstreams = [(name, up) for name, up in cfg.upstreams.items()]
    upstream_results = await asyncio.gather(*(_upstream(name, up) for name, up in upstreams))
    jwks_results = await asyncio.gather(*(_jwks(issuer.jwks_url) for issuer in cfg.jwt.issuers))
    ok = True
    for store, failed in zip(stores, store_results):
        ok &= _say(failed, f"{store.name} at {redact_url(store.url)}: ok")
    for failed, line in [*upstream_results, *jwks_results]:
        ok &= _say(failed, line)
    return ok


async def _jwks(url: str) -> tuple[str | None, str]:
    """(failure, success line) of one identity provider's key set, fetched as the gateway
    fetches it (identity/jwks.py)."""
    from ..config.stores import why
    from ..identity.jwks import fetch_jwks

    where = f"identity provider's key set at {redact_url(url)}"
    try:
        document = await asyncio.wait_for(fetch_jwks(url, _TIMEOUT_S), _TIMEOUT_S + 1)
    except (asyncio.TimeoutError, TimeoutError):
        return f"cannot reach the {where}: no answer within {_TIMEOUT_S:g} s", ""
    except HTTPError as exc:
        return f"the {where} answered {exc.code} without a JSON key set", ""
    except ValueError:   # not JSON, or too large
        document = None
    except Exception as exc:  # URLError, OSError, ssl errors: one line, never a traceback
        return f"cannot reach the {where}: {why(getattr(exc, 'reason', exc))}", ""
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        return f"the {where} answered without a JSON key set", ""
    return None, f"{where}: ok ({len(keys)} keys)"


def _say(failure: str | None, line: str) -> bool:
    if failure is None:
        print(line)
        return True
    print(f"tokenward: {failure}", file=sys.stderr)
    return False


async def _upstream(name: str, up: UpstreamConfig) -> tuple[str | None, str]:
    """(failure, success line) of one upstream's health probe."""
    from ..config.schema import BUILTIN_MOCK

    where = f"upstream {name} at {redact_url(up.base_url)}"
    if up.base_url == BUILTIN_MOCK:
        return None, f"upstream {name}: the built-in mock, started by serve"
    if not up.health_path:
        return None, f"{where}: not probed (health_path: null)"
    from ..config.stores import why
    from ..upstream.client import UpstreamError, UpstreamTimeout
    from ..upstream.targets import auth_headers, pool_for

    timeout = min(up.connect_timeout_s, _TIMEOUT_S)
    pool = pool_for(name, up, up.base_url)   # what serve sends requests and /readyz probes through
    try:
        reply = await pool.request("GET", up.health_path, auth_headers(name, up), b"", timeout=timeout)
        try:
            await reply.read(timeout=timeout)
        finally:
            reply.abort()
    except UpstreamTimeout:
        return f"cannot reach the {where}: no answer within {timeout:g} s", ""
    except UpstreamError as exc:
        return f"cannot reach the {where}: {why(exc.__cause__ or exc)}", ""
    finally:
        await pool.aclose()
    if not 200 <= reply.status < 300:
        return f"the {where} answered {reply.status} to GET {up.health_path}", ""
    return None, f"{where}: ok"


# One cheap request to each store, as serve's start-up would make (check-config --connect).
async def probe(store: Store, cfg: Config, timeout: float = 5.0) -> str | None:
    """None when the store answers one cheap request, else the failure line."""
    try:
        await asyncio.wait_for(_ping(store, cfg), timeout)
    except asyncio.TimeoutError:
        return f"cannot reach the {store.name} at {redact_url(store.url)}: no answer within {timeout:g} s"
    except Exception as exc:  # whatever the driver raises: said in one line, never a traceback
        return failure(store, exc)
    return None


async def _ping(store: Store, cfg: Config) -> Any:
    if store.name == "key store":
        from ..keys.store import open_keystore

        if _sqlite_not_made_yet(store.url):
            return None   # start-up makes it; a probe must not

        keys = await open_keystore(store.url)
        try:
            return await keys.get("tw-connect-probe")
        finally:
            await keys.close()
    from ..budget.redis import RedisStore

    redis = RedisStore(store.url, max(cfg.store.timeout_ms / 1000, 1.0), cfg.store.client)
    try:
        return await redis.open_reservations(f"{cfg.store.key_prefix}:connect-probe")
    finally:
        await redis.close()


def _sqlite_not_made_yet(url: str) -> bool:
    """A SQLite file that does not exist yet, where start-up can make it (its folders too,
    keys/sql.py); one it could not make raises, as opening it at start-up would fail."""
    import os
    from pathlib import Path

    scheme, _, rest = url.partition("://")
    if scheme.split("+", 1)[0] != "sqlite":
        return False
    path = Path(rest[1:].split("?", 1)[0])
    if not rest[1:] or path.name == ":memory:" or path.exists():
        return False
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise NotADirectoryError(20, f"{folder} is a file, not a folder")
    if not os.access(folder, os.W_OK):
        raise PermissionError(13, f"the folder {folder} is not writable")
    return True
