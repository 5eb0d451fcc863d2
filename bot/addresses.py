"""The IPv4 addresses an IPv6 address carries inside, which a gateway may connect to.

An IPv4-mapped address (``::ffff:127.0.0.1``), a 6to4 address (``2002:7f00:1::``), a
Teredo address (its server and its client) and a NAT64 address (``64:ff9b::7f00:1``) all
lead to an IPv4 address on some path; an address check that reads only the IPv6 form
lets them through. ``fetch_url`` (``tools/web_address``) and the egress proxy
(``sandbox/egress_policy``) check each one found here as well. Pure.
"""

from __future__ import annotations

import ipaddress

NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses ``ip`` carries (IPv4-mapped, 6to4, Teredo, NAT64); [] for none."""
    found = [ip.ipv4_mapped, ip.sixtofour]
    if ip.teredo is not None:
        found += list(ip.teredo)
    if ip in NAT64:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return [address for address in found if address is not None]
