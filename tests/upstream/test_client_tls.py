"""UpstreamPool over TLS to a loopback server with a throwaway self-signed certificate."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tokenward.upstream.client import UpstreamConnectError, UpstreamPool


@pytest.fixture(scope="module")
def cert_files(tmp_path_factory):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tokenward-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    (folder / "cert.pem").write_bytes(cert_pem)
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return folder / "cert.pem", folder / "key.pem", cert_pem.decode()


@pytest.fixture
async def tls_server(cert_files):
    cert, key, _ = cert_files
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    state = {"connections": 0, "heads": [], "closed": asyncio.Event()}

    async def handle(reader, writer):
        state["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                state["heads"].append(head)
                if b"/stream" in head:
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nsome\r\n")
                    await writer.drain()
                    while await reader.read(4096):
                        pass
                    break
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nsecure\r\n0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            state["closed"].set()
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
    state["port"] = server.sockets[0].getsockname()[1]
    yield state
    server.close()
    await server.wait_closed()


async def test_https_request_and_keep_alive(tls_server, cert_files):
    ctx = ssl.create_default_context(cadata=cert_files[2])
    pool = UpstreamPool(f"https://127.0.0.1:{tls_server['port']}/v1", ssl_context=ctx)
    try:
        for _ in range(3):
            resp = await pool.request("GET", "/models", [], b"")
            assert resp.status == 200
            assert await resp.read() == b"secure"
        assert tls_server["connections"] == 1
        port = tls_server["port"]
        assert tls_server["heads"][0] == b"GET /v1/models HTTP/1.1\r\nhost: 127.0.0.1:%d\r\n\r\n" % port
    finally:
        await pool.aclose()


async def test_https_abort_mid_body(tls_server, cert_files):
    ctx = ssl.create_default_context(cadata=cert_files[2])
    pool = UpstreamPool(f"https://127.0.0.1:{tls_server['port']}/v1", ssl_context=ctx)
    try:
        resp = await pool.request("GET", "/stream", [], b"")
        assert await resp.next_chunk() == b"some"
        resp.abort()
        await asyncio.wait_for(tls_server["closed"].wait(), 1)
        assert pool.stats["open"] == 0
    finally:
        await pool.aclose()


async def test_untrusted_certificate_is_connect_error(tls_server):
    # no ssl_context: the default context must refuse the self-signed certificate
    pool = UpstreamPool(f"https://127.0.0.1:{tls_server['port']}/v1")
    with pytest.raises(UpstreamConnectError) as info:
        await pool.request("GET", "/models", [], b"")
    assert "CERTIFICATE_VERIFY_FAILED" in info.value.detail
    assert pool.stats["open"] == 0
