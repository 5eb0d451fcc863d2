"""Webhook deliveries missed while the bot was down are asked for again: the real
worker maintenance and store, the real GitHub adapter in App mode, GitHub's
``/app/hook/deliveries`` answered by respx at the transport as documented."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import respx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.events import ForgeKind
from bot.forges.github import GitHubForge
from bot.forges.github_auth import GitHubSession
from bot.forges.retry import WritePacer
from bot.worker.redelivery import MAX_PER_PASS, PACE_SECONDS
from tests.e2e.support import gh_comment, github_repo
from tests.harness import FIXTURES, Harness

API = "https://api.github.com"
APP_ID = "4242"
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC).timestamp()
HOUR = 3600.0
EXAMPLE = json.loads((FIXTURES / "github" / "rest" / "hook-delivery-items.json").read_text())[0]


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def item(attempt: int, guid: str, hours_ago: float, status: int, **fields: Any) -> dict[str, Any]:
    """One attempt, shaped like GitHub's documented example."""
    data: dict[str, Any] = copy.deepcopy(EXAMPLE)
    when = datetime.fromtimestamp(NOW - hours_ago * HOUR, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    data.update(id=attempt, guid=guid, delivered_at=when, status_code=status, **fields)
    data["status"] = "OK" if status == 200 else "Invalid HTTP Response: 502"
    return data


class FakeDeliveries:
    """GitHub's list (newest first, pages linked by ``cursor``) and its redelivery endpoint."""

    def __init__(self, router: respx.MockRouter, pages: list[list[dict[str, Any]]]) -> None:
        self.pages = pages
        self.listed: list[httpx.Request] = []
        self.asked: list[int] = []
        router.get(f"{API}/app/hook/deliveries").mock(side_effect=self.list)
        router.post(url__regex=rf"{API}/app/hook/deliveries/\d+/attempts").mock(
            side_effect=self.redeliver
        )

    def list(self, request: httpx.Request) -> httpx.Response:
        self.listed.append(request)
        page = int(request.url.params.get("cursor", "v1_0").removeprefix("v1_"))
        headers = {}
        if page + 1 < len(self.pages):
            nxt = f"{API}/app/hook/deliveries?per_page=100&cursor=v1_{page + 1}"
            headers["Link"] = f'<{nxt}>; rel="next"'
        return httpx.Response(200, json=self.pages[page], headers=headers)

    def redeliver(self, request: httpx.Request) -> httpx.Response:
        self.asked.append(int(request.url.path.split("/")[-2]))
        return httpx.Response(202, json={})


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_called=False) as mock:
        yield mock


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def app_forge(http: httpx.AsyncClient, key: rsa.RSAPrivateKey, clock: Clock) -> GitHubForge:
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode("ascii")
    session = GitHubSession(
        api_url=API, http=http, app_id=APP_ID, private_key=pem, pacer=WritePacer(interval=0.0),
        clock=clock,
    )  # fmt: skip
    return GitHubForge(session)


def with_forge(bot: Harness, forge: GitHubForge) -> list[float]:
    bot.runtime.forges[ForgeKind.GITHUB] = forge
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    bot.worker._maintenance.redeliveries.sleep = sleep
    return sleeps


async def test_failed_deliveries_of_the_last_day_are_asked_for_once(
    tmp_path: Path, router: respx.MockRouter, http: httpx.AsyncClient, key: rsa.RSAPrivateKey
) -> None:
    clock = Clock()
    pages = [
        [
            item(9, "guid-received", 0.5, 502),  # answered too late, but it is in the inbox
            item(8, "guid-c", 1, 200, redelivery=True),  # redelivered already, fine now
            item(7, "guid-a", 2, 502),
            item(6, "guid-ok", 2.5, 200),
            item(5, "guid-c", 3, 500),
        ],
        [
            item(4, "guid-f", 20, 0),  # nothing answered
            item(3, "guid-f", 21, 0, redelivery=True),  # (a redelivery is never asked for)
            item(2, "guid-old", 30, 502),  # before the window: not read further
        ],
        [item(1, "guid-older", 40, 502)],
    ]
    fake = FakeDeliveries(router, pages)
    overrides = {"github": {"app_id": APP_ID}}
    async with Harness(tmp_path, clock=clock, overrides=overrides) as bot:
        github_repo(bot)
        response = await bot.send_github(
            "issue_comment", gh_comment("hi"), delivery="guid-received"
        )
        assert response.status_code == 202
        sleeps = with_forge(bot, app_forge(http, key, clock))

        await bot.worker.maintain()  # on start

        assert fake.asked == [4, 7]  # oldest first, one per delivery
        assert sleeps == [PACE_SECONDS]
        assert len(fake.listed) == 2  # the third page is older than the window
        scheme, _, bearer = fake.listed[0].headers["authorization"].partition(" ")
        assert scheme.lower() == "bearer"
        claims = jwt.decode(bearer, key.public_key(), algorithms=["RS256"],
                            options={"verify_exp": False})  # fmt: skip
        assert claims["iss"] == APP_ID

        await bot.worker.maintain()  # not due yet
        assert len(fake.listed) == 2

        clock.now += 601  # the next pass looks since the last one, and asks nothing twice
        await bot.worker.maintain()
        assert fake.asked == [4, 7] and len(fake.listed) == 3
        assert fake.listed[-1].url.params.get("cursor") is None

    async with Harness(tmp_path, clock=clock, overrides=overrides) as bot:  # a restart
        with_forge(bot, app_forge(http, key, clock))
        await bot.worker.maintain()
        assert fake.asked == [4, 7]


async def test_a_pass_asks_for_a_bounded_number_and_the_next_goes_on(
    tmp_path: Path, router: respx.MockRouter, http: httpx.AsyncClient, key: rsa.RSAPrivateKey
) -> None:
    clock = Clock()
    many = [item(100 - n, f"guid-{n}", 1 + n / 10, 502) for n in range(MAX_PER_PASS + 3)]
    fake = FakeDeliveries(router, [many])
    async with Harness(tmp_path, clock=clock, overrides={"github": {"app_id": APP_ID}}) as bot:
        sleeps = with_forge(bot, app_forge(http, key, clock))
        await bot.worker.maintain()
        assert len(fake.asked) == MAX_PER_PASS
        assert fake.asked == sorted(fake.asked)  # oldest first
        assert sleeps == [PACE_SECONDS] * (MAX_PER_PASS - 1)
        clock.now += 601
        await bot.worker.maintain()
        assert sorted(fake.asked) == sorted(100 - n for n in range(MAX_PER_PASS + 3))


async def test_a_token_has_no_app_hook_and_nothing_is_asked(
    tmp_path: Path, router: respx.MockRouter, http: httpx.AsyncClient
) -> None:
    fake = FakeDeliveries(router, [[item(1, "guid-a", 1, 502)]])
    async with Harness(tmp_path) as bot:
        session = GitHubSession(api_url=API, http=http, token="ghp_test")
        with_forge(bot, GitHubForge(session))
        await bot.worker.maintain()
        assert fake.listed == [] and fake.asked == []


async def test_github_trouble_is_logged_and_the_next_pass_tries_again(
    tmp_path: Path, router: respx.MockRouter, http: httpx.AsyncClient, key: rsa.RSAPrivateKey
) -> None:
    clock = Clock()
    router.get(f"{API}/app/hook/deliveries").mock(
        side_effect=[
            httpx.Response(200, json=[{"id": "x", "guid": None}]),  # unreadable
            httpx.Response(200, json=[item(7, "guid-a", 2, 502)]),
        ]
    )
    attempts = router.post(f"{API}/app/hook/deliveries/7/attempts").respond(202, json={})
    async with Harness(tmp_path, clock=clock, overrides={"github": {"app_id": APP_ID}}) as bot:
        with_forge(bot, app_forge(http, key, clock))
        await bot.worker.maintain()
        assert not attempts.called
        clock.now += 601
        await bot.worker.maintain()
        assert attempts.call_count == 1
