"""Test-side OIDC: signing keys generated here, a JWKS served on loopback, tokens minted with PyJWT."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://idp.test.example/"
AUDIENCE = "tokenward-gateway"


class SigningKey:
    def __init__(self, kid: str, kind: str = "RSA") -> None:
        self.kid = kid
        if kind == "RSA":
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.alg = "RS256"
            self.jwk = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            self.alg = "ES256"
            self.jwk = json.loads(ECAlgorithm.to_jwk(self.private.public_key()))
        self.jwk.update({"kid": kid, "use": "sig"})

    def mint(self, claims: dict[str, Any] | None = None, headers: dict[str, Any] | None = None,
             **overrides: Any) -> str:
        now = int(time.time())
        payload = {"iss": ISSUER, "aud": AUDIENCE, "sub": "user-1", "iat": now, "exp": now + 300,
                   "tenant": "acme", **(claims or {})}
        for name, value in overrides.items():
            if value is None:
                payload.pop(name, None)
            else:
                payload[name] = value
        return jwt.encode(payload, self.private, algorithm=self.alg, headers={"kid": self.kid, **(headers or {})})


class JwksServer:
    """Serves ``document`` at /jwks over loopback HTTP and counts fetches."""

    def __init__(self, *keys: SigningKey) -> None:
        self.document: dict = {"keys": [k.jwk for k in keys]}
        self.fetches = 0

    def publish(self, *keys: SigningKey) -> None:
        self.document = {"keys": [k.jwk for k in keys]}

    async def start(self) -> JwksServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/jwks"
        return self

    async def stop(self) -> None:
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            self.fetches += 1
            body = json.dumps(self.document).encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def issuer_config(jwks_url: str, **overrides: Any) -> dict:
    return {"issuer": ISSUER, "audience": AUDIENCE, "jwks_url": jwks_url, "algorithms": ["RS256", "ES256"],
            "tenant_claim": "tenant", "jwks_min_refetch_s": 30, "leeway_s": 0, **overrides}
