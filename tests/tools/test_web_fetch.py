"""fetch_url's HTTP side against a real local server: the allow-list on every hop, the
pinned address, redirects, and the size and time limits against hostile servers."""

from __future__ import annotations

import gzip
import time
from http.server import BaseHTTPRequestHandler
from ipaddress import ip_address

import pytest

from bot.tools.web_fetch import Fetcher, FetchRules, Inflater, WebError, checked_url
from tests.tools.web_site import Resolver, allow_test_server, redirect, send, site

PAGE = b"<html><head><title>T</title></head><body><p>Hello</p></body></html>"


def fetcher(
    *domains: str,
    max_bytes: int = 65536,
    timeout: float = 5.0,
    max_redirects: int = 5,
    resolver: Resolver | None = None,
) -> Fetcher:
    rules = FetchRules(
        allowed_domains=domains or ("docs.test",),
        max_bytes=max_bytes,
        timeout=timeout,
        max_redirects=max_redirects,
        user_agent="test-agent",
    )
    return Fetcher(rules, resolver=resolver or Resolver(), check=allow_test_server)


def page(handler: BaseHTTPRequestHandler) -> None:
    send(handler, PAGE)


async def test_a_page_of_an_allowed_domain_comes_through_the_checked_address() -> None:
    resolver = Resolver()
    with site({"/page": page}) as web:
        found = await fetcher(resolver=resolver).fetch(web.url("/page#part"))
    assert found.status == 200 and found.body == PAGE and not found.cut
    assert found.url == web.url("/page") and found.content_type.startswith("text/html")
    # No real resolver knows docs.test: the request went to the address the fetcher checked,
    # under the page's own name, asked once.
    assert resolver.asked == ["docs.test"]
    path, headers = web.requests[0]
    assert path == "/page" and headers["Host"] == f"docs.test:{web.port}"
    assert headers["User-Agent"] == "test-agent" and "Cookie" not in headers


async def test_subdomains_are_allowed_but_look_alike_names_are_not() -> None:
    with site({"/page": page}) as web:
        found = await fetcher(resolver=Resolver()).fetch(web.url("/page", "sub.docs.test"))
        assert found.status == 200
        for host in ("other.test", "evildocs.test", "docs.test.evil.test"):
            with pytest.raises(WebError, match="not an allowed domain"):
                await fetcher().fetch(web.url("/page", host))
    assert len(web.requests) == 1


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://docs.test/x", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("http://user:pw@docs.test/", "user name or password"),
        ("http://docs.test/" + "a" * 3000, "longer than"),
        ("http://[::1/", "not a valid URL"),
    ],
)
def test_urls_that_are_refused_before_anything_is_sent(url: str, why: str) -> None:
    with pytest.raises(WebError, match=why):
        checked_url(url, ("*",))


async def test_each_redirect_is_checked_against_the_allow_list() -> None:
    resolver = Resolver()
    routes = {"/go": redirect("/next"), "/next": redirect("http://other.test/x")}
    refused = pytest.raises(WebError, match=r"other\.test is not an allowed domain")
    with site(routes) as web, refused:
        await fetcher(resolver=resolver).fetch(web.url("/go"))
    assert [path for path, _ in web.requests] == ["/go", "/next"]
    assert resolver.asked == ["docs.test", "docs.test"]  # other.test was never looked up


async def test_a_redirect_within_the_allow_list_is_followed_and_reported() -> None:
    with site({"/old": redirect("/new", 301), "/new": page}) as web:
        found = await fetcher().fetch(web.url("/old"))
    assert found.body == PAGE and found.url == web.url("/new")
    assert found.redirects == (web.url("/old"),)


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("http://10.0.0.7/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://127.0.0.2/", "loopback"),
        ("http://[fd00::1]/", "unique-local|private"),
        ("http://0.0.0.0/", "unspecified"),
    ],
)
async def test_a_redirect_to_an_inside_address_is_refused(target: str, why: str) -> None:
    with site({"/go": redirect(target)}) as web, pytest.raises(WebError, match=why):
        await fetcher("*").fetch(web.url("/go"))


async def test_a_name_that_also_points_inside_is_refused_whole() -> None:
    resolver = Resolver(answers={"docs.test": [ip_address("127.0.0.1"), ip_address("10.1.2.3")]})
    refused = pytest.raises(WebError, match=r"docs\.test: 10\.1\.2\.3 is a private address")
    with site({"/page": page}) as web, refused:
        await fetcher(resolver=resolver).fetch(web.url("/page"))
    assert web.requests == []


async def test_redirect_loops_and_long_chains_end() -> None:
    routes = {"/a": redirect("/b"), "/b": redirect("/a")}
    routes |= {f"/r{n}": redirect(f"/r{n + 1}") for n in range(10)}
    with site(routes) as web:
        with pytest.raises(WebError, match="redirect loop"):
            await fetcher().fetch(web.url("/a"))
        with pytest.raises(WebError, match="more than 3 redirects"):
            await fetcher(max_redirects=3).fetch(web.url("/r0"))
    assert [p for p, _ in web.requests].count("/r3") == 1 and "/r4" not in str(web.requests)


def endless(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/plain")
    handler.send_header("Connection", "close")
    handler.end_headers()
    while True:
        handler.wfile.write(b"x" * 65536)


async def test_an_endless_body_is_read_up_to_the_bound() -> None:
    with site({"/endless": endless}) as web:
        found = await fetcher(max_bytes=100_000).fetch(web.url("/endless"))
    assert found.cut and len(found.body) == 100_000


def bomb(handler: BaseHTTPRequestHandler) -> None:
    send(
        handler,
        gzip.compress(b"A" * 50_000_000),
        "text/plain",
        headers={"Content-Encoding": "gzip"},
    )


async def test_a_compressed_body_is_bounded_as_it_is_decompressed() -> None:
    with site({"/bomb": bomb}) as web:
        found = await fetcher(max_bytes=200_000).fetch(web.url("/bomb"))
    assert found.cut and found.body == b"A" * 200_000


def brotli(handler: BaseHTTPRequestHandler) -> None:
    send(handler, b"\x0b\x02\x80hi\x03", "text/plain", headers={"Content-Encoding": "br"})


async def test_an_encoding_that_is_not_asked_for_is_refused() -> None:
    with site({"/br": brotli}) as web, pytest.raises(WebError, match="'br' body"):
        await fetcher().fetch(web.url("/br"))


def trickle(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/plain")
    handler.send_header("Content-Length", "1000000")
    handler.end_headers()
    for _ in range(200):
        handler.wfile.write(b"x")
        handler.wfile.flush()
        time.sleep(0.05)


def silent(handler: BaseHTTPRequestHandler) -> None:
    time.sleep(5)


@pytest.mark.parametrize("path", ["/trickle", "/silent"])
async def test_a_slow_server_is_given_up_on_after_the_total_time(path: str) -> None:
    with site({"/trickle": trickle, "/silent": silent}) as web:
        started = time.monotonic()
        with pytest.raises(WebError, match="no whole answer within 1 s"):
            await fetcher(timeout=1.0).fetch(web.url(path))
        assert time.monotonic() - started < 3


def huge_headers(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    for n in range(2000):
        handler.send_header(f"X-Filler-{n}", "y" * 1000)
    handler.end_headers()
    handler.wfile.write(b"body")


async def test_huge_headers_are_refused() -> None:
    refused = pytest.raises(WebError, match="RemoteProtocolError")
    with site({"/headers": huge_headers}) as web, refused:
        await fetcher().fetch(web.url("/headers"))


async def test_an_error_status_is_a_failure_with_its_code() -> None:
    with site({}) as web, pytest.raises(WebError, match="answered HTTP 404"):
        await fetcher().fetch(web.url("/missing"))


def test_decompression_never_gives_more_than_the_room_left() -> None:
    inflater = Inflater("gzip")
    bomb = gzip.compress(b"A" * 50_000_000)  # about 50 KB that would grow to 50 MB
    assert len(inflater.take(bomb, 1000)) == 1000
    assert len(Inflater("identity").take(b"x" * 5000, 10)) == 10
