"""Which addresses ``fetch_url`` may connect to, and the host names' addresses.

A page may only come from a public address: loopback, private (RFC 1918), shared
(100.64/10), link-local (169.254/16 with the cloud metadata service 169.254.169.254,
fe80::/10), unique-local (fc00::/7), site-local, multicast, unspecified, reserved and
documentation addresses are refused, and so is an IPv6 address that carries one of
them inside (IPv4-mapped ``::ffff:127.0.0.1``, 6to4, Teredo, NAT64 ``64:ff9b::/96``).
``refused_address`` is pure; ``system_resolver`` asks the system's resolver through the
event loop (``loop.getaddrinfo``), never blocking it. Both are parameters of the fetcher,
so a test can allow its own loopback server on purpose.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable

from bot.addresses import embedded_ipv4

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# host, port -> the host's addresses (raises OSError when it has none)
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]
# an address -> why it is refused, or None when it may be used
AddressCheck = Callable[[IPAddress], str | None]


def refused_address(ip: IPAddress) -> str | None:
    """Why ``fetch_url`` may not connect to ``ip``, or None for a public address."""
    if isinstance(ip, ipaddress.IPv6Address):
        for inner in embedded_ipv4(ip):
            why = refused_address(inner)
            if why is not None:
                return f"{why} (inside {ip})"
    rules = (
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local, "a site-local address"),
        (ip.version == 6 and ip in ipaddress.IPv6Network("fc00::/7"), "a unique-local address"),
        (ip.is_private, "a private address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a public address"),
    )
    for hit, why in rules:
        if hit:
            return f"{ip} is {why}"
    return None


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The addresses of ``host`` from the system's resolver (off the event loop)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        text = str(sockaddr[0]).partition("%")[0]  # an IPv6 scope (fe80::1%eth0) goes
        ip = ipaddress.ip_address(text)
        if ip not in found:
            found.append(ip)
    return found


async def checked_addresses(
    host: str, port: int, *, resolver: Resolver, check: AddressCheck
) -> list[IPAddress]:
    """The addresses to connect to for ``host``: all of them pass ``check``.

    Raises ``PermissionError`` when any address is refused (a name that also points
    inside is not trusted with its public ones) and ``OSError`` when there is none."""
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    addresses = [literal] if literal is not None else await resolver(host, port)
    if not addresses:
        raise OSError(f"{host} has no address")
    for ip in addresses:
        why = check(ip)
        if why is not None:
            raise PermissionError(f"{host}: {why}" if literal is None else why)
    return addresses
