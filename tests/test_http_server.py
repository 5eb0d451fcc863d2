"""How ``bot serve`` configures uvicorn (bot/http_server.py): the header deadline, the
connection cap fitted to the open-file limit, keep-alive, and no proxy headers of
uvicorn's own. Against real slow clients: tests/adversarial/test_slow_headers.py."""

from __future__ import annotations

import resource

import pytest
from starlette.applications import Starlette

from bot.config import ServerSettings, Settings
from bot.http_server import RESERVED_FILES, HeaderDeadlineProtocol, fit_to_file_limit, server_config

UNLIMITED = resource.RLIM_INFINITY


@pytest.mark.parametrize(
    ("wanted", "soft", "hard", "expected"),
    [
        (1000, 65536, 65536, (65536, 1000)),  # room enough: nothing changes
        (1000, 1024, 65536, (1000 + RESERVED_FILES, 1000)),  # the soft limit is raised
        (1000, 1024, UNLIMITED, (1000 + RESERVED_FILES, 1000)),
        (1000, UNLIMITED, UNLIMITED, (UNLIMITED, 1000)),
        (1000, 512, 512, (512, 512 - RESERVED_FILES)),  # the hard limit lowers the cap
        (1000, 200, 200, (200, 100)),  # never below half of what there is
    ],
)
def test_connections_fit_the_open_file_limit(
    wanted: int, soft: int, hard: int, expected: tuple[int, int]
) -> None:
    assert fit_to_file_limit(wanted, soft, hard) == expected


def test_uvicorn_gets_the_deadline_the_cap_and_no_proxy_headers_of_its_own() -> None:
    server = ServerSettings(
        header_timeout=3.5, keep_alive_timeout=7, forwarded_allow_ips=("10.0.0.0/8",)
    )
    config = server_config(Starlette(), Settings(server=server), max_connections=321)
    assert config.limit_concurrency == 321 and config.timeout_keep_alive == 7
    assert config.proxy_headers is False and config.server_header is False
    assert isinstance(config.http, type) and issubclass(config.http, HeaderDeadlineProtocol)
    assert (config.http.header_timeout, config.http.max_connections) == (3.5, 321)


@pytest.mark.parametrize("bad", ["localhost", "10.0.0.0/33", "*", ""])
def test_forwarded_allow_ips_takes_addresses_and_networks_only(bad: str) -> None:
    with pytest.raises(ValueError, match="not an IP address or network"):
        ServerSettings(forwarded_allow_ips=(bad,))
    assert ServerSettings(forwarded_allow_ips=("10.0.0.5", "fd00::/8")).forwarded_allow_ips
