"""The listener's TLS context, built from ``server.tls``."""

from __future__ import annotations

import ssl

from ..config.schema import Config


def server_tls(config: Config) -> ssl.SSLContext | None:
    """The listener's TLS context (server.tls), or None for plain HTTP."""
    tls = config.server.tls
    if tls is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.cert_file, tls.key_file)
    return context
