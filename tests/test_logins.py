"""The API token and the dashboard's login behind a TLS proxy: the token's length, the
throttle on wrong tokens per client, and the proxy's X-Forwarded-* believed only from
``server.forwarded_allow_ips``. Through the real app, then through a real ``bot serve``."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from bot.app import create_app
from bot.config import ConfigError
from bot.throttle import FailureThrottle, client_key
from tests.harness import ROOT, Harness
from tests.test_cli import base_env, bot, free_port, wait_ready

TOKEN = "a-dashboard-token-of-forty-characters-00"
LOGIN = "/dashboard/login"


def with_token(**server: Any) -> dict[str, dict[str, Any]]:
    return {"server": {"api_token": SecretStr(TOKEN), **server}}


@asynccontextmanager
async def client_from(bot: Harness, address: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the harness's app whose peer address is ``address``."""
    transport = httpx.ASGITransport(app=bot.app, client=(address, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://bot.test") as client:
        yield client


# --- the token's length ----------------------------------------------------------------------


def test_bot_serve_refuses_a_token_under_32_characters(tmp_path: Path) -> None:
    env = base_env(tmp_path, BOT_API_TOKEN="x" * 31)
    result = subprocess.run(
        [sys.executable, "-m", "bot", "serve", "--port", str(free_port())],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "BOT_API_TOKEN (server.api_token) is 31 characters long" in result.stderr
    assert "at least 32" in result.stderr and "x" * 31 not in result.stderr
    shown = bot("config", "show", env=env)  # the other commands still work
    assert shown.returncode == 0 and "api_token: '***'" in shown.stdout


async def test_the_app_will_not_serve_the_api_with_a_short_token(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides=with_token()) as harness:
        short = harness.settings.server.model_copy(update={"api_token": SecretStr("short")})
        harness.runtime.settings = harness.settings.model_copy(update={"server": short})
        with pytest.raises(ConfigError, match="5 characters long"):
            create_app(harness.runtime, manage_runtime=False)


# --- the throttle -----------------------------------------------------------------------------


async def test_wrong_bearer_tokens_are_throttled_per_client(tmp_path: Path) -> None:
    async with (
        Harness(tmp_path, overrides=with_token(auth_max_failures=5)) as harness,
        client_from(harness, "198.51.100.7") as guesser,
        client_from(harness, "198.51.100.8") as other,
    ):
        wrong = {"Authorization": "Bearer " + "y" * 40}
        for _ in range(5):
            assert (await guesser.get("/api/tasks", headers=wrong)).status_code == 401
        refused = await guesser.get("/api/tasks", headers=wrong)
        assert refused.status_code == 429
        assert 0 < int(refused.headers["retry-after"]) <= 300
        # While it waits, even the right token is refused: it learns nothing.
        right = {"Authorization": f"Bearer {TOKEN}"}
        assert (await guesser.get("/api/tasks", headers=right)).status_code == 429
        login = await guesser.post(LOGIN, data={"token": TOKEN})  # one count for both doors
        assert login.status_code == 429 and "retry-after" in login.headers
        assert (await other.get("/api/tasks", headers=right)).status_code == 200
        assert (await other.get("/api/tasks", headers=wrong)).status_code == 401


async def test_failed_logins_are_throttled_and_the_page_says_so(tmp_path: Path) -> None:
    async with (
        Harness(tmp_path, overrides=with_token(auth_max_failures=3)) as harness,
        client_from(harness, "203.0.113.9") as guesser,
    ):
        for _ in range(3):
            page = await guesser.post(LOGIN, data={"token": "guess"})
            assert page.status_code == 401 and "Wrong token." in page.text
        page = await guesser.post(LOGIN, data={"token": "guess"})
        assert page.status_code == 429 and "Too many wrong tokens" in page.text
        assert int(page.headers["retry-after"]) > 0
        ok = await guesser.get("/dashboard/login")  # the form itself is still shown
        assert ok.status_code == 200


def test_the_throttle_forgets_after_its_window_and_holds_a_bounded_table() -> None:
    now = [1000.0]
    throttle = FailureThrottle(limit=2, window=60, clock=lambda: now[0], max_clients=100)
    throttle.failed("192.0.2.1")
    now[0] += 30
    throttle.failed("192.0.2.1")
    assert throttle.retry_after("192.0.2.1") == 30  # the window began with the first failure
    now[0] += 30.5
    assert throttle.retry_after("192.0.2.1") is None
    for n in range(5000):  # a flood of addresses
        throttle.failed(f"10.{n // 256 % 256}.{n % 256}.1")
    assert len(throttle) <= 100


def test_an_ipv6_client_counts_by_its_network() -> None:
    assert client_key("2001:db8:1:2::5") == client_key("2001:db8:1:2:ffff::1")
    assert client_key("2001:db8:1:3::5") != client_key("2001:db8:1:2::5")
    assert client_key("::ffff:192.0.2.1") == "192.0.2.1"


# --- behind a proxy ---------------------------------------------------------------------------


async def test_the_cookie_is_secure_when_a_configured_proxy_says_https(tmp_path: Path) -> None:
    https = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.20"}
    proxied = with_token(forwarded_allow_ips=("10.0.0.0/8",))
    async with (
        Harness(tmp_path, overrides=proxied) as harness,
        client_from(harness, "10.1.2.3") as proxy,
        client_from(harness, "192.0.2.50") as stranger,
    ):
        through_proxy = await proxy.post(LOGIN, data={"token": TOKEN}, headers=https)
        assert through_proxy.status_code == 303
        assert "secure" in through_proxy.headers["set-cookie"].lower()
        # A peer that is not a configured proxy cannot claim https (nor an address).
        direct = await stranger.post(LOGIN, data={"token": TOKEN}, headers=https)
        assert direct.status_code == 303
        assert "secure" not in direct.headers["set-cookie"].lower()


async def test_without_configured_proxies_forwarded_headers_are_ignored(tmp_path: Path) -> None:
    async with (
        Harness(tmp_path, overrides=with_token(auth_max_failures=2)) as harness,
        client_from(harness, "127.0.0.1") as local,
    ):
        https = {"X-Forwarded-Proto": "https"}
        login = await local.post(LOGIN, data={"token": TOKEN}, headers=https)
        assert "secure" not in login.headers["set-cookie"].lower()
        # A guesser cannot dodge the throttle by naming a new address each time.
        for n in range(3):
            spoofed = {"X-Forwarded-For": f"198.51.100.{n}"}
            page = await local.post(LOGIN, data={"token": "guess"}, headers=spoofed)
        assert page.status_code == 429


def test_a_real_server_behind_a_proxy_on_loopback(tmp_path: Path) -> None:
    """``bot serve`` with ``forwarded_allow_ips: [127.0.0.1]``: the proxy's scheme makes the
    cookie Secure, and the throttle counts the address the proxy names."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "server:\n  forwarded_allow_ips: ['127.0.0.1']\n  auth_max_failures: 2\n",
        encoding="utf-8",
    )
    port = free_port()
    env = base_env(tmp_path, BOT_CONFIG=str(config), BOT_API_TOKEN=TOKEN)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--role", "web", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_ready(port)
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=10) as client:
            as_https = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.1"}
            login = client.post(LOGIN, data={"token": TOKEN}, headers=as_https)
            assert login.status_code == 303 and "secure" in login.headers["set-cookie"].lower()
            client.cookies.clear()
            one = {"X-Forwarded-For": "198.51.100.2", "Authorization": "Bearer wrong"}
            statuses = [client.get("/api/tasks", headers=one).status_code for _ in range(3)]
            assert statuses == [401, 401, 429]
            other = {"X-Forwarded-For": "198.51.100.3", "Authorization": "Bearer wrong"}
            assert client.get("/api/tasks", headers=other).status_code == 401
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def test_the_throttle_is_only_touched_on_the_event_loop(tmp_path: Path) -> None:
    """It is not thread-safe: the API's check must not run in a thread pool."""
    from starlette.routing import Router

    from bot.api.config_file import ConfigApi
    from bot.api.operations import Guard
    from bot.api.routes import TaskApi, api_routes

    threads: set[int] = set()

    class Recording(FailureThrottle):
        def retry_after(self, host: str | None) -> int | None:
            threads.add(threading.get_ident())
            return super().retry_after(host)

        def failed(self, host: str | None) -> None:
            threads.add(threading.get_ident())
            super().failed(host)

    async with Harness(tmp_path, overrides=with_token()) as harness:
        throttle = Recording(limit=5, window=60, clock=time.monotonic)
        runtime = harness.runtime
        config = ConfigApi(settings=runtime.current_settings, environ={}, reload=lambda: [])
        api = TaskApi(
            runtime.store,
            settings=runtime.current_settings,
            forges=runtime.forge,
            user_config=runtime.user_config,
            llm_health=runtime.llm_health,
            wake=lambda: None,
            config=config,
        )
        transport = httpx.ASGITransport(app=Router(api_routes(api, Guard(TOKEN, throttle))))
        async with httpx.AsyncClient(transport=transport, base_url="http://bot.test") as client:
            for _ in range(3):
                await client.get("/tasks", headers={"Authorization": "Bearer nope"})
    assert threads == {threading.get_ident()}
