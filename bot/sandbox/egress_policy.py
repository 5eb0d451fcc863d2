"""Where a sandboxed command may connect through the egress proxy (``egress``): the
package indexes only, never the host or a private network.

A target passes when its host name matches an allowed rule and every address it
resolves to is public: loopback, link-local (169.254.0.0/16 with the cloud metadata
service, fe80::/10), private (10/8, 172.16/12, 192.168/16), shared (100.64/10),
unique-local (fc00::/7), multicast, reserved and unspecified addresses are refused,
and so is every address of the host's own interfaces, and an IPv6 address that carries
a refused IPv4 address inside (IPv4-mapped, 6to4, Teredo, NAT64: ``bot.addresses``).
The ranges are listed here on purpose, not taken from ``ipaddress``'s ``is_private``,
which also counts the documentation ranges that real index hosts may answer from.

The allowed hosts are the public indexes (PyPI, the npm registry), the hosts of the
index URLs in the host's pip and npm configuration (environment and files), and
``sandbox.egress_allow``. An upstream proxy the host uses (``HTTPS_PROXY`` ...,
pip's or npm's ``proxy``) is chained to. ``read_policy`` reads small configuration
files: call it in a thread; everything else is pure.
"""

from __future__ import annotations

import base64
import configparser
import ipaddress
import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from bot.addresses import embedded_ipv4

DEFAULT_HOSTS = ("pypi.org", "files.pythonhosted.org", "registry.npmjs.org")
WEB_PORTS = frozenset({80, 443})
MAX_CONFIG_BYTES = 1 << 20

_BLOCKED = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
        "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4",
        "240.0.0.0/4", "::/128", "::1/128", "64:ff9b:1::/48", "fc00::/7", "fe80::/10",
        "fec0::/10", "ff00::/8",
    )
)  # fmt: skip
_WHY = {
    "127.0.0.0/8": "a loopback address",
    "::1/128": "a loopback address",
    "169.254.0.0/16": "a link-local address (cloud metadata)",
    "fe80::/10": "a link-local address",
}
PIP_FILES = ("/etc/pip.conf", "/etc/xdg/pip/pip.conf")
PIP_USER_FILES = (".config/pip/pip.conf", ".pip/pip.conf")
PIP_KEYS = ("index-url", "extra-index-url", "find-links")
NPM_FILES = ("/etc/npmrc", "/usr/etc/npmrc", "/usr/local/etc/npmrc")


def blocked_reason(address: str) -> str | None:
    """Why ``address`` may not be reached (None: it is a public address)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        for inner in embedded_ipv4(ip):  # IPv4-mapped, 6to4, Teredo, NAT64
            if why := blocked_reason(str(inner)):
                return f"{why} ({inner} inside {ip})"
    for net in _BLOCKED:
        if ip.version == net.version and ip in net:
            return _WHY.get(str(net), f"a private or reserved address ({net})")
    return None


def is_local_address(address: str) -> bool:
    """Whether ``address`` is one of this host's own (it can be bound here); sends nothing."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return False
    return True


@dataclass(frozen=True, slots=True)
class HostRule:
    """``host`` exactly, or any name under it (``*.example.com``); ``port`` None: 80 and 443."""

    host: str
    port: int | None = None
    subdomains: bool = False

    def matches(self, host: str, port: int) -> bool:
        name = host.lower().rstrip(".")
        if self.host == "*":
            pass
        elif self.subdomains:
            if not name.endswith("." + self.host):
                return False
        elif name != self.host:
            return False
        return port in WEB_PORTS if self.port is None else port == self.port


def parse_rule(text: str) -> HostRule:
    """``host``, ``host:port``, ``*.domain`` or ``*`` (any public host); raises ValueError."""
    raw = text.strip().lower()
    if "://" in raw:
        parts = urlsplit(raw)
        raw = parts.netloc.rsplit("@", 1)[-1]
    host, _, port = raw.rpartition(":") if raw.count(":") == 1 else (raw, "", "")
    if not port:
        host = raw
    subdomains = host.startswith("*.")
    host = host[2:] if subdomains else host
    if not host or any(c in host for c in "/@ \t") or ("*" in host and host != "*"):
        raise ValueError(f"{text!r} is not a host name, host:port or *.domain")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    return HostRule(host.rstrip("."), int(port) if port else None, subdomains)


@dataclass(frozen=True, slots=True)
class Upstream:
    """A proxy the host reaches the internet through."""

    host: str
    port: int
    authorization: str = ""  # a Proxy-Authorization value, from the URL's user:password


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    rules: tuple[HostRule, ...]
    https_proxy: Upstream | None = None
    http_proxy: Upstream | None = None
    no_proxy: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False)

    def allowed(self, host: str, port: int) -> bool:
        return any(rule.matches(host, port) for rule in self.rules)

    def upstream(self, host: str, *, tls: bool) -> Upstream | None:
        name = host.lower().rstrip(".")
        for entry in self.no_proxy:
            if entry == "*" or name == entry or name.endswith("." + entry.lstrip(".")):
                return None
        return self.https_proxy if tls else self.http_proxy


def url_rule(url: str) -> HostRule | None:
    """The rule for the host of an index URL (None: a local path or file:// URL)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return HostRule(parts.hostname.lower().rstrip("."), port)


def upstream_of(url: str) -> Upstream | None:
    parts = urlsplit(url.strip() if "://" in url else f"http://{url.strip()}")
    if parts.scheme != "http" or not parts.hostname:
        return None  # only plain HTTP proxies are chained to
    try:
        port = parts.port or 80
    except ValueError:
        return None
    auth = ""
    if parts.username is not None:
        pair = f"{parts.username}:{parts.password or ''}".encode()
        auth = "Basic " + base64.b64encode(pair).decode()
    return Upstream(parts.hostname, port, auth)


def build_policy(
    urls: Iterable[str],
    allow: Sequence[str],
    *,
    proxies: Mapping[str, str],
) -> EgressPolicy:
    """The policy from the index URLs found, the configured extra hosts and the host's
    proxy settings (``https``, ``http``, ``no``: their URLs or lists)."""
    rules = [HostRule(host) for host in DEFAULT_HOSTS]
    rules += [rule for url in urls if (rule := url_rule(url)) is not None]
    rules += [parse_rule(entry) for entry in allow]
    no_proxy = tuple(
        e.strip().lower() for e in proxies.get("no", "").split(",") if e.strip()
    )  # fmt: skip
    https = upstream_of(proxies["https"]) if proxies.get("https") else None
    http = upstream_of(proxies["http"]) if proxies.get("http") else None
    return EgressPolicy(tuple(dict.fromkeys(rules)), https, http, no_proxy)


def read_policy(environ: Mapping[str, str], home: Path, allow: Sequence[str]) -> EgressPolicy:
    """The policy from the host's pip and npm configuration (reads small files)."""
    urls: list[str] = []
    pip_proxy = ""
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "UV_INDEX_URL",
                 "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX"):  # fmt: skip
        urls += environ.get(name, "").split()
    pip_files = [*PIP_FILES, *(str(home / rel) for rel in PIP_USER_FILES)]
    pip_files += [environ["PIP_CONFIG_FILE"]] if environ.get("PIP_CONFIG_FILE") else []
    for path in pip_files:
        values = _pip_values(Path(path))
        for key in PIP_KEYS:
            urls += values.get(key, "").split()
        pip_proxy = values.get("proxy", pip_proxy)
    npm: dict[str, str] = {}
    npm_files = [*NPM_FILES, str(home / ".npmrc")]
    for name in ("NPM_CONFIG_USERCONFIG", "npm_config_userconfig"):
        npm_files += [environ[name]] if environ.get(name) else []
    for path in npm_files:
        npm.update(_npm_values(Path(path)))
    for name in ("NPM_CONFIG_REGISTRY", "npm_config_registry"):
        urls += [environ[name]] if environ.get(name) else []
    urls += [value for key, value in npm.items() if key.endswith("registry")]

    def first(*names: str, default: str = "") -> str:
        return next((environ[n] for n in names if environ.get(n)), default)

    proxies = {
        "https": first("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
                       default=pip_proxy or npm.get("https-proxy") or npm.get("proxy", "")),
        "http": first("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
                      default=pip_proxy or npm.get("proxy", "")),
        "no": first("NO_PROXY", "no_proxy"),
    }  # fmt: skip
    return build_policy(urls, allow, proxies=proxies)


def _text(path: Path) -> str:
    try:
        if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
            return ""
        return path.read_text("utf-8", errors="replace")
    except OSError:
        return ""


def _pip_values(path: Path) -> dict[str, str]:
    """The ``[global]`` and ``[install]`` values of a pip configuration file."""
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(_text(path))
    except configparser.Error:
        return {}
    values: dict[str, str] = {}
    for section in ("global", "install"):
        if parser.has_section(section):
            values.update({k: os.path.expandvars(v) for k, v in parser.items(section)})
    return values


def _npm_values(path: Path) -> dict[str, str]:
    values = {}
    for line in _text(path).splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith(("#", ";", "//")):
            values[key.strip().lower()] = value.strip().strip('"')
    return values
