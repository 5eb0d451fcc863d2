"""One page over HTTP(S), within the allow-list, the address rules and the limits.

Every hop (the URL asked for and each redirect) is checked before anything is sent: an
http(s) URL without credentials, a host of the allowed domains, and every address the
host resolves to public (``bot/tools/web_address.py``). The request then goes to the
checked address itself, the Host header and the TLS server name (SNI, and the name the
certificate must carry) kept to the host: a name that resolves elsewhere a moment later
(DNS rebinding) changes nothing. Redirects are followed by hand, at most
``max_redirects``, a URL seen twice being a loop. A fresh client per hop: no connection,
cookie or proxy (``trust_env`` is off) is shared between hosts.

The body is read as it streams, decompressed here with a bound (gzip or deflate: a small
compressed body cannot grow past ``max_bytes`` in memory), and reading stops at
``max_bytes`` (the result says it was cut). ``timeout`` bounds the whole fetch, redirects
and a body that trickles in included; headers are bounded by httpcore (100 KiB).
"""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
import zlib
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx

from bot.tools.web_address import (
    AddressCheck,
    IPAddress,
    Resolver,
    checked_addresses,
    refused_address,
    system_resolver,
)
from bot.tools.web_policy import WebLimits, domain_allowed

REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_URL_CHARS = 2048
ACCEPT = "text/html, application/xhtml+xml, text/plain;q=0.9, application/json;q=0.9, */*;q=0.1"


class WebError(Exception):
    """A fetch that did not give a page; the message says why, for the agent."""


@dataclass(frozen=True, slots=True)
class Fetched:
    url: str  # the last hop's URL
    status: int
    content_type: str
    body: bytes
    cut: bool  # reading stopped at max_bytes
    redirects: tuple[str, ...] = ()  # the URLs that redirected, in order


@dataclass(frozen=True, slots=True)
class FetchRules:
    allowed_domains: tuple[str, ...]
    max_bytes: int
    timeout: float
    max_redirects: int
    user_agent: str

    @classmethod
    def of(cls, limits: WebLimits) -> FetchRules:
        return cls(
            allowed_domains=limits.allowed_domains,
            max_bytes=limits.max_bytes,
            timeout=limits.timeout,
            max_redirects=limits.max_redirects,
            user_agent=limits.user_agent,
        )


def checked_url(text: str, allowed: tuple[str, ...]) -> httpx.URL:
    """``text`` as a URL ``fetch_url`` may ask for (its fragment dropped), or ``WebError``."""
    if len(text) > MAX_URL_CHARS:
        raise WebError(f"the URL is longer than {MAX_URL_CHARS} characters")
    try:
        url = httpx.URL(text.strip())
    except httpx.InvalidURL as exc:
        raise WebError(f"not a valid URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise WebError(f"only http and https URLs can be fetched, not {text[:200]!r}")
    if url.userinfo:
        raise WebError("a URL with a user name or password is refused")
    host = url.raw_host.decode("ascii").lower().strip("[]")
    if not domain_allowed(host, allowed):
        shown = ", ".join(allowed) if allowed else "none"
        raise WebError(f"{host} is not an allowed domain (allowed: {shown})")
    return url.copy_with(fragment=None)


class Inflater:
    """Content-Encoding undone with a bound on what one chunk may grow to."""

    def __init__(self, encoding: str) -> None:
        name = encoding.strip().lower()
        if name in ("", "identity"):
            self._z = None
        elif name in ("gzip", "x-gzip", "deflate"):
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 32)  # zlib or gzip header
        else:
            raise WebError(f"the server sent a {encoding!r} body, which is not read")

    def take(self, chunk: bytes, room: int) -> bytes:
        """At most ``room`` bytes of what ``chunk`` holds."""
        if self._z is None:
            return chunk[:room]
        out = bytearray()
        data = chunk
        try:
            while room > len(out):
                out += self._z.decompress(data, room - len(out))
                data = self._z.unconsumed_tail
                if not data:
                    break
        except zlib.error as exc:
            raise WebError(f"the compressed body is broken: {exc}") from None
        return bytes(out)


async def read_bounded(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """The body, at most ``max_bytes`` of it (decompressed), and whether it was cut."""
    inflater = Inflater(response.headers.get("content-encoding", ""))
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += inflater.take(chunk, max_bytes + 1 - len(body))
        if len(body) > max_bytes:
            del body[max_bytes:]
            return bytes(body), True
    return bytes(body), False


def _host_header(url: httpx.URL) -> str:
    host = url.raw_host.decode("ascii")
    host = f"[{host}]" if ":" in host else host
    default = 443 if url.scheme == "https" else 80
    return host if url.port in (None, default) else f"{host}:{url.port}"


class Fetcher:
    """Fetches pages under ``rules``; ``resolver`` and ``check`` are the address seams
    (a test allows its loopback server through ``check``), ``verify`` the TLS trust."""

    def __init__(
        self,
        rules: FetchRules,
        *,
        resolver: Resolver = system_resolver,
        check: AddressCheck = refused_address,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.rules = rules
        self._resolver = resolver
        self._check = check
        self._verify = verify

    async def fetch(self, url: str) -> Fetched:
        """The page at ``url``; ``WebError`` says why there is none."""
        try:
            async with asyncio.timeout(self.rules.timeout):
                return await self._follow(url)
        except TimeoutError:
            raise WebError(f"no whole answer within {self.rules.timeout:g} s") from None

    async def _follow(self, first: str) -> Fetched:
        seen: list[str] = []
        target = checked_url(first, self.rules.allowed_domains)
        while True:
            seen.append(str(target))
            found = await self._hop(target)
            if isinstance(found, Fetched):
                return dataclasses.replace(found, redirects=tuple(seen[:-1]))
            if len(seen) > self.rules.max_redirects:
                raise WebError(f"more than {self.rules.max_redirects} redirects (from {first})")
            target = checked_url(urljoin(str(target), found), self.rules.allowed_domains)
            if str(target) in seen:
                raise WebError(f"a redirect loop: {target} redirects back to itself")

    async def _hop(self, url: httpx.URL) -> Fetched | str:
        """One request: the page, or the Location a redirect names."""
        host = url.raw_host.decode("ascii").strip("[]")
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            addresses = await checked_addresses(
                host, port, resolver=self._resolver, check=self._check
            )
        except PermissionError as exc:
            raise WebError(f"refused: {exc}") from None
        except OSError as exc:
            raise WebError(f"cannot resolve {host}: {exc}") from None
        last: Exception | None = None
        for ip in addresses:
            try:
                return await self._request(url, ip)
            except httpx.ConnectError as exc:  # the next address may answer
                last = exc
            except httpx.HTTPError as exc:
                raise WebError(f"{url.host}: {type(exc).__name__}: {exc}") from None
        raise WebError(f"cannot connect to {url.host}: {last}")

    async def _request(self, url: httpx.URL, ip: IPAddress) -> Fetched | str:
        pinned = url.copy_with(host=str(ip))
        headers = {
            "Host": _host_header(url),
            "User-Agent": self.rules.user_agent,
            "Accept": ACCEPT,
            "Accept-Encoding": "gzip, deflate",
        }
        extensions = {"sni_hostname": url.raw_host.decode("ascii")} if url.scheme == "https" else {}
        transport = httpx.AsyncHTTPTransport(verify=self._verify, trust_env=False, retries=0)
        async with (
            httpx.AsyncClient(
                transport=transport,
                trust_env=False,
                follow_redirects=False,
                timeout=self.rules.timeout,
            ) as client,
            client.stream("GET", pinned, headers=headers, extensions=extensions) as response,
        ):
            location = str(response.headers.get("location", ""))
            if response.status_code in REDIRECTS and location:
                return location
            if response.status_code >= 400:
                raise WebError(
                    f"{url} answered HTTP {response.status_code} {response.reason_phrase}"
                )
            body, cut = await read_bounded(response, self.rules.max_bytes)
            return Fetched(
                url=str(url),
                status=response.status_code,
                content_type=response.headers.get("content-type", ""),
                body=body,
                cut=cut,
            )
