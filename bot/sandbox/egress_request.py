"""A proxy request's head read strictly, for the egress proxy (``egress``): the host and
port it names, checked, and the request line and ``Host`` rebuilt from them alone.

The policy checks one reading of the target; whatever the bot forwards is read again by
another parser (the host's own proxy, the index). Two parsers disagree on odd forms (an
``@`` after a ``#`` or ``?``, two ``@``, a tab, a backslash: ``http://a@127.0.0.1:8080@
pypi.org/`` is pypi.org to Python and 127.0.0.1 to tinyproxy), so only plain forms pass
and nothing of the client's target is forwarded as it came:

- the request line is ``METHOD TARGET HTTP/1.x`` with single spaces and visible ASCII
  only; a header holds no control character and no folded line;
- ``CONNECT`` takes ``host:port``; any other method an ``http://host[:port]`` URL whose
  path and query follow a ``/`` or ``?``, without userinfo (``@`` in the authority) and
  without a fragment;
- a host is a plain DNS name (letters, digits, hyphens, dots; its last label neither all
  digits nor a hexadecimal number, which parsers read as an IPv4 address: ``127.1``,
  ``0x7f.1``), a dotted IPv4 address in its one canonical form, or a bracketed IPv6
  address without a zone;
- a port is 1 to 65535 in decimal.

Pure: raises ``ValueError`` with the reason.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_METHOD = re.compile(r"[A-Z]{1,20}")
_VERSIONS = frozenset({"HTTP/1.0", "HTTP/1.1"})
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
_PORT = re.compile(r"[0-9]{1,5}")
_URL = re.compile(r"(?i:http)://(?P<authority>[^/?#]*)(?P<rest>[/?][^#]*)?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class Request:
    """A proxy request as the bot forwards it: only checked parts."""

    method: str
    host: str  # a lower-case name, or an address in its canonical form (IPv6 unbracketed)
    port: int
    tls: bool  # CONNECT: a tunnel
    path: str  # "/..." with the query ("" for CONNECT)
    headers: tuple[tuple[str, str], ...]
    version: str
    address: IPAddress | None = None  # the host when it is an address

    @property
    def authority(self) -> str:
        """``host:port`` as a request line and ``Host`` write it."""
        host = f"[{self.host}]" if isinstance(self.address, ipaddress.IPv6Address) else self.host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        """The absolute URL of a plain HTTP request, rebuilt from the checked parts."""
        return f"http://{self.authority}{self.path}"


def parse_head(head: bytes) -> Request:
    """The request line and headers of a proxy request (without the blank line)."""
    line, *rest = head.decode("latin-1").split("\r\n")
    if not line.isascii() or not line.isprintable():
        raise ValueError("the request line holds a control or non-ASCII character")
    parts = line.split(" ")
    if len(parts) != 3:
        raise ValueError(f"{line!r} is not METHOD TARGET VERSION")
    method, target, version = parts
    if not _METHOD.fullmatch(method) or version not in _VERSIONS:
        raise ValueError(f"{line!r} is not METHOD TARGET HTTP/1.x")
    headers = _headers(rest)
    if method == "CONNECT":
        host, address, port = parse_authority(target, default_port=None)
        return Request(method, host, port, True, "", headers, version, address)
    match = _URL.fullmatch(target)
    if match is None:
        raise ValueError(
            f"{target!r}: a proxy takes http://host[:port]/path URLs (no fragment) and CONNECT"
        )
    host, address, port = parse_authority(match["authority"], default_port=80)
    path = match["rest"] or "/"
    path = path if path.startswith("/") else "/" + path
    return Request(method, host, port, False, path, headers, version, address)


def parse_authority(text: str, *, default_port: int | None) -> tuple[str, IPAddress | None, int]:
    """``host[:port]`` -> (host, its address when it is one, port)."""
    if "@" in text:
        raise ValueError(f"{text!r}: userinfo (user@host) is not accepted")
    if text.startswith("["):
        inside, sep, after = text[1:].partition("]")
        if not sep or (after and not after.startswith(":")):
            raise ValueError(f"{text!r} is not [IPv6]:port")
        return str(_ipv6(inside)), _ipv6(inside), _port(after[1:], text, default_port)
    host, sep, port = text.partition(":")
    if not sep and default_port is None:
        raise ValueError(f"{text!r} is not host:port")
    name, address = plain_host(host)
    return name, address, _port(port, text, None) if sep else _port("", text, default_port)


def plain_host(text: str) -> tuple[str, IPAddress | None]:
    """A plain host name (lower case) or a canonical dotted IPv4 address."""
    name = text.lower()
    labels = name.removesuffix(".").split(".")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(f"{text!r} is not a plain host name")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):  # as a browser reads it: an IPv4 address
        try:
            address = ipaddress.IPv4Address(name)  # refuses 127.1, 0x7f.0.0.1, 017.0.0.1
        except ValueError:
            raise ValueError(f"{text!r} is neither a host name nor a dotted IPv4 address") from None
        return str(address), address
    return name, None


def _ipv6(text: str) -> ipaddress.IPv6Address:
    if "%" in text:
        raise ValueError(f"[{text}]: an IPv6 zone is not accepted")
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        raise ValueError(f"[{text}] is not an IPv6 address") from None


def _port(text: str, whole: str, default: int | None) -> int:
    if not text and default is not None:
        return default
    if not _PORT.fullmatch(text) or not 0 < int(text) < 65536:
        raise ValueError(f"{whole!r}: the port must be a number from 1 to 65535")
    return int(text)


def _headers(lines: list[str]) -> tuple[tuple[str, str], ...]:
    found = []
    for line in lines:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            raise ValueError(f"{line[:80]!r} is not a header line (NAME: value, not folded)")
        value = value.strip(" \t")
        if _CONTROL.search(value.replace("\t", " ")):
            raise ValueError(f"the header {name} holds a control character")
        found.append((name, value))
    return tuple(found)
