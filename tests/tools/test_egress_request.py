"""The egress proxy's request head, read strictly: two parsers (the bot's and the host's
proxy's) must read the same host and port, so only plain forms pass (issue 27, item 2).
The same requests through a real tinyproxy and bubblewrap:
tests/adversarial/test_egress_upstream.py."""

from __future__ import annotations

import pytest

from bot.sandbox.egress_request import parse_head


@pytest.mark.parametrize(
    "line",
    [
        "GET http://127.0.0.1:8080\t@idx.example/ HTTP/1.1",  # a tab
        "GET http://a@127.0.0.1:8080@idx.example/ HTTP/1.1",  # tinyproxy reads the first @
        "GET http://idx.example#@127.0.0.1:8080/ HTTP/1.1",  # ... and no fragment
        "GET http://idx.example\\@127.0.0.1:8080/ HTTP/1.1",  # a browser reads \\ as /
        "GET http://user:pw@idx.example/ HTTP/1.1",  # userinfo
        "GET http://idx.example/#frag HTTP/1.1",
        "GET http://idx.example:80:81/ HTTP/1.1",
        "GET http://idx.example:+80/ HTTP/1.1",
        "GET http://idx.example:0/ HTTP/1.1",
        "GET http://idx.example:/ HTTP/1.1",
        "GET http://idx_example/ HTTP/1.1",
        "GET http://idx.example\x0b/ HTTP/1.1",
        "GET http://idx.\u00e9xample/ HTTP/1.1",
        "GET http://2130706433/ HTTP/1.1",  # 127.0.0.1 to inet_aton
        "GET http://127.1/ HTTP/1.1",
        "GET http://0x7f.0.0.1/ HTTP/1.1",
        "GET http://017.0.0.1/ HTTP/1.1",
        "GET http://[::1%25lo]/ HTTP/1.1",
        "GET http://[::1/ HTTP/1.1",
        "GET https://idx.example/ HTTP/1.1",
        "GET /relative HTTP/1.1",
        "GET  http://idx.example/ HTTP/1.1",
        "GET http://idx.example/ HTTP/1.1 x",
        "GET http://idx.example/ HTTP/2",
        "CONNECT idx.example HTTP/1.1",
        "CONNECT a@127.0.0.1:8080 HTTP/1.1",  # tinyproxy connects to 127.0.0.1
        "CONNECT 127.0.0.1:8080@idx.example:443 HTTP/1.1",
        "CONNECT idx.example:443\t HTTP/1.1",
    ],
)
def test_a_target_two_parsers_may_read_apart_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match=r"."):
        parse_head(line.encode("latin-1"))


@pytest.mark.parametrize(
    "header",
    ["X-A: b\x00c", "X-A: b\rc", " folded: x", "Bad Header: x", "no colon", "X-A: b\x7fc"],
)
def test_a_header_with_a_control_character_or_folded_is_refused(header: str) -> None:
    with pytest.raises(ValueError, match=r"header"):
        parse_head(f"GET http://idx.example/ HTTP/1.1\r\n{header}".encode("latin-1"))


def test_plain_targets_are_read_into_checked_parts() -> None:
    plain = parse_head(b"GET http://Idx.Example./simple/x/?a=1&b=%2F HTTP/1.0\r\nA: b\tc")
    assert (plain.host, plain.port, plain.path, plain.address) == (
        "idx.example.", 80, "/simple/x/?a=1&b=%2F", None,
    )  # fmt: skip
    assert plain.url == "http://idx.example.:80/simple/x/?a=1&b=%2F"
    assert plain.headers == (("A", "b\tc"),)
    tunnel = parse_head(b"CONNECT [2a04:4e42::223]:443 HTTP/1.1")
    assert tunnel.tls and tunnel.authority == "[2a04:4e42::223]:443"
    assert parse_head(b"CONNECT 151.101.0.223:443 HTTP/1.1").address is not None
    assert parse_head(b"GET http://163.com/ HTTP/1.1").host == "163.com"  # a digit label
    # tinyproxy reads the host up to the first "/": the rebuilt URL puts one before the query
    query = parse_head(b"GET http://idx.example?@127.0.0.1:8080/ HTTP/1.1")
    assert query.url == "http://idx.example:80/?@127.0.0.1:8080/"
