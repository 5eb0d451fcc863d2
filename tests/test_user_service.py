"""Fetching a person's planning overrides from a real local user-config service
(bot/config/user_service.py): the answer, the cache and its TTL, failures falling back
to no overrides with a log line, and nothing cached of a failure."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.config import UserConfigApiSettings
from bot.config.user_service import UserConfigService, person_url
from tests.harness import Harness
from tests.test_logins import TOKEN
from tests.user_config_server import Answer, UserConfigServer, document, user_config_server

# Deeper than the JSON decoder's stack (Python's recursion limit), within the body limit.
DEEP = b"[" * 100_000 + b"]" * 100_000


def nested(levels: int) -> dict[str, object]:
    """``{"strategy": {"strategy": ... "simple"}}``, ``levels`` deep."""
    value: object = "simple"
    for _ in range(levels):
        value = {"strategy": value}
    assert isinstance(value, dict)
    return value


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server() -> Iterator[UserConfigServer]:
    with user_config_server() as running:
        yield running


def api(server: UserConfigServer, **values: object) -> UserConfigApiSettings:
    return UserConfigApiSettings.model_validate(
        {"enabled": True, "url": server.url, "timeout": 2, "cache_ttl": 60, **values}
    )


async def test_the_persons_planning_part_of_the_answer_is_returned(
    server: UserConfigServer,
) -> None:
    server.answers["alice"] = document({"strategy": "simple", "reflection": {"depth": "deep"}})
    service = UserConfigService()
    found = await service.planning_for(api(server), forge="github", user="alice")
    assert found == {"strategy": "simple", "reflection": {"depth": "deep"}}
    assert server.asked == ["github/alice"]


async def test_the_token_from_the_environment_is_sent_as_a_bearer_token(
    server: UserConfigServer,
) -> None:
    server.answers["alice"] = document({"strategy": "simple"})
    service = UserConfigService()
    await service.planning_for(api(server, token="s3cret-token"), forge="github", user="alice")
    await service.planning_for(api(server, cache_ttl=0), forge="github", user="bob")
    assert server.authorization == ["Bearer s3cret-token", ""]


async def test_answers_are_cached_per_person_until_the_ttl_ends(server: UserConfigServer) -> None:
    server.answers["alice"] = document({"strategy": "simple"})
    server.answers["bob"] = document({"strategy": "hierarchical"})
    clock = Clock()
    service = UserConfigService(clock=clock)
    settings = api(server, cache_ttl=60)
    for _ in range(3):
        assert await service.planning_for(settings, forge="github", user="alice") == {
            "strategy": "simple"
        }
        assert await service.planning_for(settings, forge="github", user="bob") == {
            "strategy": "hierarchical"
        }
    assert (server.count("alice"), server.count("bob")) == (1, 1)

    clock.now += 59
    await service.planning_for(settings, forge="github", user="alice")
    assert server.count("alice") == 1
    clock.now += 2  # past the TTL
    server.answers["alice"] = document({"strategy": "chain_of_thought"})
    assert await service.planning_for(settings, forge="github", user="alice") == {
        "strategy": "chain_of_thought"
    }
    assert server.count("alice") == 2


async def test_the_same_login_on_another_forge_is_another_person(server: UserConfigServer) -> None:
    server.answers["alice"] = document({"strategy": "simple"})
    service = UserConfigService()
    await service.planning_for(api(server), forge="github", user="alice")
    await service.planning_for(api(server), forge="gitlab", user="alice")
    assert server.asked == ["github/alice", "gitlab/alice"]


async def test_a_ttl_of_zero_asks_for_every_task(server: UserConfigServer) -> None:
    server.answers["alice"] = document({"strategy": "simple"})
    service = UserConfigService()
    for _ in range(2):
        await service.planning_for(api(server, cache_ttl=0), forge="github", user="alice")
    assert server.count("alice") == 2


async def test_a_person_without_settings_gets_none_and_that_is_cached(
    server: UserConfigServer,
) -> None:
    service = UserConfigService()
    for _ in range(2):
        assert await service.planning_for(api(server), forge="github", user="carol") == {}
    assert server.count("carol") == 1


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (Answer(status=500, body=b"{}"), "HTTP 500"),
        (Answer(body=b"<html>"), "not JSON"),
        (Answer(body=json.dumps({"status": "error", "data": {}}).encode()), "status"),
        (Answer(body=json.dumps({"status": "success", "data": []}).encode()), "data"),
        (document(["strategy"]), "data.planning"),  # type: ignore[arg-type]
        (Answer(body=b"{}", delay=3.0), "TimeoutError"),
        (Answer(body=b'{"status": "success", "data": {"planning": ' + DEEP + b"}}"), "nested"),
        (document(nested(30)), "nests deeper than 16 levels"),
        (Answer(body=b'{"status": "success", "data": {"planning": {"strategy": "\xff"}}}'), "JSON"),
    ],
)
async def test_a_failure_means_no_overrides_with_a_log_line_and_is_not_cached(
    server: UserConfigServer, caplog: pytest.LogCaptureFixture, answer: Answer, said: str
) -> None:
    server.answers["alice"] = answer
    service = UserConfigService()
    settings = api(server, timeout=1.5)  # room for a loaded machine; the slow answer takes 3 s
    with caplog.at_level(logging.WARNING, logger="bot.user_config"):
        assert await service.planning_for(settings, forge="github", user="alice") == {}
    [record] = caplog.records
    assert "github:alice" in record.getMessage() and "using the defaults" in record.getMessage()
    assert said in record.getMessage()

    server.answers["alice"] = document({"strategy": "simple"})
    assert await service.planning_for(settings, forge="github", user="alice") == {
        "strategy": "simple"
    }
    assert server.count("alice") == 2


async def test_an_unreachable_service_means_no_overrides(caplog: pytest.LogCaptureFixture) -> None:
    with user_config_server() as gone:
        url = gone.url  # the port is free again once the server is closed
    settings = UserConfigApiSettings(enabled=True, url=url, timeout=1)
    with caplog.at_level(logging.WARNING, logger="bot.user_config"):
        assert await UserConfigService().planning_for(settings, forge="github", user="a") == {}
    assert "using the defaults" in caplog.text


async def test_switched_off_it_asks_nobody(server: UserConfigServer) -> None:
    settings = UserConfigApiSettings(enabled=False, url=server.url)
    assert await UserConfigService().planning_for(settings, forge="github", user="alice") == {}
    assert server.asked == []


def test_the_login_is_one_path_segment() -> None:
    url = person_url("https://cfg.example/u/{forge}/{user}", forge="gitlab", user="a/../b c")
    assert url == "https://cfg.example/u/gitlab/a%2F..%2Fb%20c"


def test_enabled_without_a_person_in_the_url_is_a_config_error() -> None:
    with pytest.raises(ValueError, match=r"\{user\}"):
        UserConfigApiSettings(enabled=True, url="https://cfg.example/settings")
    with pytest.raises(ValueError, match="http"):
        UserConfigApiSettings(enabled=True, url="file:///etc/{user}")


async def test_the_api_answers_the_defaults_when_the_service_nests_too_deeply(
    tmp_path: Path, server: UserConfigServer
) -> None:
    server.answers["alice"] = Answer(body=b'{"status": "success", "data": ' + DEEP + b"}")
    overrides = {
        "planning": {"user_config_api": api(server)},
        "server": {"api_token": SecretStr(TOKEN)},
    }
    async with Harness(tmp_path, overrides=overrides) as bot:
        response = await bot.client.get(
            "/api/settings/effective",
            params={"user": "alice"},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    assert response.status_code == 200, response.text
    assert response.json()["overrides_applied"] == []
