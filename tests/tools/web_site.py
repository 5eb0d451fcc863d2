"""A small web site on 127.0.0.1 for the web tools' tests, and the seams that reach it.

``site()`` serves ``routes`` (path -> handler function) on a free loopback port and
records each request's path and headers. The fetcher refuses loopback by default, so
``allow_test_server`` is the one check that lets it through: the default rules with
127.0.0.1 alone allowed. ``names_resolver`` answers for made-up host names
(``docs.test``...) with 127.0.0.1, so the allow-list is tested with names, and a
connection can only reach the server through the pinned address (no real resolver
knows these names).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import ssl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from bot.tools.web_address import IPAddress, refused_address
from tests.loopback import serving

LOOPBACK = ipaddress.IPv4Address("127.0.0.1")
TEST_NAMES = ("docs.test", "other.test", "evil.test", "sub.docs.test")

Route = Callable[[BaseHTTPRequestHandler], None]


def allow_test_server(ip: IPAddress) -> str | None:
    """The default address rules, except that the test server's 127.0.0.1 may be used."""
    return None if ip == LOOPBACK else refused_address(ip)


@dataclass
class Resolver:
    """Made-up names -> 127.0.0.1 (or the addresses given); counts the look-ups."""

    answers: dict[str, list[IPAddress]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.asked.append(host)
        if host in self.answers:
            return list(self.answers[host])
        if host in TEST_NAMES:
            return [LOOPBACK]
        raise OSError(f"unknown test host {host}")


@dataclass
class Site:
    port: int
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def url(self, path: str, host: str = "docs.test") -> str:
        return f"http://{host}:{self.port}{path}"


def send(
    handler: BaseHTTPRequestHandler,
    body: bytes,
    content_type: str = "text/html; charset=utf-8",
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(body)


def redirect(to: str, status: int = 302) -> Route:
    def route(handler: BaseHTTPRequestHandler) -> None:
        send(handler, b"", status=status, headers={"Location": to})

    return route


@contextmanager
def site(routes: dict[str, Route], *, wrap: ssl.SSLContext | None = None) -> Iterator[Site]:
    """``routes`` served on 127.0.0.1 (over TLS with ``wrap``); an unknown path answers 404."""
    holder: list[Site] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            holder[0].requests.append((self.path, dict(self.headers.items())))
            route = routes.get(self.path.partition("?")[0])
            if route is None:
                send(self, b"not here", "text/plain", status=404)
                return
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                route(self)  # a client that stopped reading ends the route, as it should

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as server:
        if wrap is not None:
            server.socket = wrap.wrap_socket(server.socket, server_side=True)
        holder.append(Site(port=server.server_address[1]))
        yield holder[0]


@dataclass(frozen=True)
class Certificates:
    """A test CA and a server certificate it signed for ``names``, as PEM."""

    ca: bytes
    cert: bytes
    key: bytes


def certificates(*names: str) -> Certificates:
    """A CA and a server certificate for ``names`` (made with cryptography, no files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "web tools test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return Certificates(
        ca=ca.public_bytes(pem),
        cert=cert.public_bytes(pem),
        key=key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )


@contextmanager
def tls_site(
    routes: dict[str, Route], certs: Certificates, tmp: Path
) -> Iterator[tuple[Site, list[str | None]]]:
    """``site`` over TLS with ``certs``; the list gets each handshake's server name (SNI)."""
    (tmp / "cert.pem").write_bytes(certs.cert)
    (tmp / "key.pem").write_bytes(certs.key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp / "cert.pem", tmp / "key.pem")
    names: list[str | None] = []
    context.sni_callback = lambda _sock, name, _ctx: names.append(name)  # type: ignore[assignment,func-returns-value]
    with site(routes, wrap=context) as web:
        yield web, names
