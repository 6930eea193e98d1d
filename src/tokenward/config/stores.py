"""The gateway's stores by name, and one wording for a store that cannot be opened or reached.

``serve`` (a start that fails) and ``check-config --connect`` (a probe of each store) say
the same line: ``cannot reach the key store at postgresql://tw:***@db:5432/keys:
connection refused``: which store, its URL without the password, and why, in one line.

The stores: the key store (``keystore.url``), the budget store (``store.url``), the
response cache's Redis (``cache.url``, else ``store.url``, when ``cache.store: redis``)
and the abuse signals' store (the budget store's Redis, on a connection of its own, when
``abuse:`` is configured). A ``memory`` store cannot fail and is not listed.
"""

from __future__ import annotations

import errno
import os
from typing import NamedTuple

from ..errors import TokenwardError
from .schema import Config

_REDIS = ("redis://", "rediss://", "unix://")
# errnos whose own words say it better than a driver's text ("Connect call failed (...)")
_PLAIN_ERRNOS = {errno.ECONNREFUSED, errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ECONNRESET}


class StoreStartError(TokenwardError):
    """A store that could not be opened at start-up; ``str()`` is the one line to print."""


class Store(NamedTuple):
    name: str     # "key store", "budget store", "cache store", "abuse store"
    url: str


def redact_url(url: str) -> str:
    """A store URL without its password (``redis://:***@host``, ``postgresql://tw:***@db``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    creds, at, host = rest.rpartition("@")
    if not at:
        return url
    user, colon, _ = creds.partition(":")
    return f"{scheme}{sep}{user}:***@{host}" if colon else url


def why(exc: BaseException) -> str:
    """The innermost reason, one short line: ``connection refused``, ``unable to open database file``."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        wrapped = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else None   # httpcore's
        inner = getattr(exc, "orig", None) or exc.__cause__ or wrapped or (
            None if exc.__suppress_context__ else exc.__context__)
        if not isinstance(inner, BaseException):
            break
        exc = inner
    text = None
    if isinstance(exc, OSError) and exc.errno:
        text = os.strerror(exc.errno) if exc.errno in _PLAIN_ERRNOS else exc.strerror
        if exc.filename:
            text = f"{text}: {exc.filename}"
    text = text or str(exc) or type(exc).__name__
    text = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    text = text.removeprefix("budget store: ")
    return (text[:1].lower() + text[1:])[:300]


def failure(store: Store, exc: BaseException) -> str:
    return f"cannot reach the {store.name} at {redact_url(store.url)}: {why(exc)}"


def stores_of(cfg: Config) -> list[Store]:
    """The stores this config opens, memory ones left out."""
    found = [Store("key store", cfg.keystore.url)]
    if cfg.store.url.startswith(_REDIS):
        found.append(Store("budget store", cfg.store.url))
    cache = cfg.cache
    if cache is not None and cache.store == "redis":
        found.append(Store("cache store", cache.url or cfg.store.url))
    if cfg.abuse is not None and cfg.store.url.startswith(_REDIS):
        found.append(Store("abuse store", cfg.store.url))
    return found


# The part that opens each store: a provider's name (assemble/providers.py), or the stage
# whose builder opens it (the cache).
_OPENED_BY = {"keystore": "key store", "admitter": "budget store", "cache": "cache store", "signal_store": "abuse store"}


def opened_by(slot: str, cfg: Config) -> Store | None:
    name = _OPENED_BY.get(slot)
    return next((store for store in stores_of(cfg) if store.name == name), None)
