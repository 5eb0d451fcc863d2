"""By default fetch_url reaches only public addresses: with the real resolver and the real
address rules, a test server on loopback cannot be reached, whatever the URL calls it.
And the pinned connection keeps the page's name for TLS: the server name sent and the
name the certificate must carry are the host's, not the address's."""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path

import pytest

from bot.tools.web_address import refused_address, system_resolver
from bot.tools.web_fetch import Fetcher, FetchRules, WebError
from tests.tools.web_site import (
    Resolver,
    allow_test_server,
    certificates,
    send,
    site,
    tls_site,
)

RULES = FetchRules(
    allowed_domains=("*",), max_bytes=65536, timeout=5.0, max_redirects=3, user_agent="t"
)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.9.9.9",
        "::1",
        "0.0.0.0",  # noqa: S104 (an address refused, not bound)
        "::",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "100.64.0.1",
        "169.254.169.254",
        "fe80::1",
        "fc00::1",
        "fd12:3456::1",
        "fec0::1",
        "224.0.0.1",
        "239.255.255.250",
        "ff02::1",
        "255.255.255.255",
        "192.0.2.1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "2002:7f00:1::",
        "2002:a00:1::",
        "64:ff9b::a9fe:a9fe",
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",
    ],
)
def test_inside_addresses_are_refused(address: str) -> None:
    assert refused_address(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert refused_address(ipaddress.ip_address(address)) is None


async def test_the_real_resolver_answers_without_blocking_and_localhost_is_loopback() -> None:
    found = await system_resolver("localhost", 80)
    assert found and all(ip.is_loopback for ip in found)


def page(handler: object) -> None:
    send(handler, b"<p>inside</p>")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "2130706433", "0x7f.1", "127.1"],
)
async def test_the_default_rules_refuse_the_loopback_server_however_it_is_named(
    host: str,
) -> None:
    fetcher = Fetcher(RULES)  # the real resolver and the real rules
    with site({"/": page}) as web:
        with pytest.raises(WebError, match=r"refused: .*loopback"):
            await fetcher.fetch(f"http://{host}:{web.port}/")
        assert web.requests == []  # nothing was sent


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[fd00::1]/",
        "http://[fe80::1]/",
        "http://0.0.0.0/",
    ],
)
async def test_the_default_rules_refuse_inside_addresses_before_connecting(url: str) -> None:
    with pytest.raises(WebError, match="refused: "):
        await Fetcher(RULES).fetch(url)


async def test_the_checked_address_serves_the_page_under_its_own_tls_name(
    tmp_path: Path,
) -> None:
    certs = certificates("docs.test")
    trust = ssl.create_default_context(cadata=certs.ca.decode())
    fetcher = Fetcher(RULES, resolver=Resolver(), check=allow_test_server, verify=trust)
    with tls_site({"/": page}, certs, tmp_path) as (web, names):
        found = await fetcher.fetch(f"https://docs.test:{web.port}/")
    assert found.body == b"<p>inside</p>" and found.url == f"https://docs.test:{web.port}/"
    assert names == ["docs.test"]  # the server name sent is the host's, not 127.0.0.1
    assert web.requests[0][1]["Host"] == f"docs.test:{web.port}"


async def test_a_certificate_for_another_name_is_refused(tmp_path: Path) -> None:
    certs = certificates("other.test")
    trust = ssl.create_default_context(cadata=certs.ca.decode())
    fetcher = Fetcher(RULES, resolver=Resolver(), check=allow_test_server, verify=trust)
    with tls_site({"/": page}, certs, tmp_path) as (web, _names):
        with pytest.raises(WebError, match=r"CERTIFICATE_VERIFY_FAILED|certificate"):
            await fetcher.fetch(f"https://docs.test:{web.port}/")
        assert web.requests == []
