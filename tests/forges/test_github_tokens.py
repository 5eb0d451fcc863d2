"""An installation token is minted for the task's one repository with the task's
permissions only, through the real ``GitHubSession`` over httpx (GitHub faked by respx)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.events import ForgeKind, RepoRef
from bot.forges.base import Permission
from bot.forges.github import GitHubForge
from bot.forges.github_auth import GitHubSession
from bot.forges.github_tokens import TASK_PERMISSIONS, narrowed, token_request
from bot.forges.retry import WritePacer

API = "https://api.github.com"
TOKENS = "/app/installations/1/access_tokens"
ONE = RepoRef(ForgeKind.GITHUB, "octo-org/one", scope_id="1")
TWO = RepoRef(ForgeKind.GITHUB, "octo-org/two", scope_id="1")
ADMIN = {"permission": "admin", "user": {"login": "octocat"}}


def minted(token: str) -> dict[str, Any]:
    return {"token": token, "expires_at": "2099-01-01T00:00:00Z"}


@pytest.fixture(scope="module")
def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode("ascii")


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=API, assert_all_called=False) as router:
        yield router


@pytest.fixture
async def forge(pem: str) -> AsyncIterator[GitHubForge]:
    async with httpx.AsyncClient() as http:
        session = GitHubSession(api_url=API, http=http, app_id="12345", private_key=pem,
                                pacer=WritePacer(interval=0.0))  # fmt: skip
        yield GitHubForge(session)


def _bodies(route: respx.Route) -> list[Any]:
    return [json.loads(call.request.content) for call in route.calls]


async def test_a_token_covers_the_one_repository_with_the_tasks_permissions(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    tokens = mock.post(TOKENS).respond(201, json=minted("ghs_one"))
    perm = mock.get("/repos/octo-org/one/collaborators/octocat/permission").respond(json=ADMIN)
    assert await forge.get_permission(ONE, "octocat") is Permission.ADMIN
    assert _bodies(tokens) == [
        {
            "repositories": ["one"],
            "permissions": {
                "metadata": "read", "contents": "write", "issues": "write",
                "pull_requests": "write", "checks": "read", "statuses": "read",
                "actions": "read",
            },
        }
    ]  # fmt: skip
    assert perm.calls.last.request.headers["authorization"] == "token ghs_one"


async def test_each_repository_of_an_installation_gets_a_token_of_its_own(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    tokens = mock.post(TOKENS)
    tokens.side_effect = [
        httpx.Response(201, json=minted("ghs_one")),
        httpx.Response(201, json=minted("ghs_two")),
    ]
    one = mock.get("/repos/octo-org/one/collaborators/octocat/permission").respond(json=ADMIN)
    two = mock.get("/repos/octo-org/two/collaborators/octocat/permission").respond(json=ADMIN)
    for _ in range(2):  # the second round is served from the cache
        await forge.get_permission(ONE, "octocat")
        await forge.get_permission(TWO, "octocat")
    assert [body["repositories"] for body in _bodies(tokens)] == [["one"], ["two"]]
    assert {c.request.headers["authorization"] for c in one.calls} == {"token ghs_one"}
    assert {c.request.headers["authorization"] for c in two.calls} == {"token ghs_two"}


async def test_an_installation_granted_less_gets_the_overlap(
    forge: GitHubForge, mock: respx.MockRouter
) -> None:
    refused = {"message": "The permissions requested are not granted to this installation."}
    tokens = mock.post(TOKENS)
    tokens.side_effect = [
        httpx.Response(422, json=refused),
        httpx.Response(201, json=minted("ghs_less")),
    ]
    granted = {"contents": "read", "issues": "write", "workflows": "write", "metadata": "read"}
    mock.get("/app/installations/1").respond(json={"id": 1, "permissions": granted})
    mock.get("/repos/octo-org/one/collaborators/octocat/permission").respond(json=ADMIN)
    await forge.get_permission(ONE, "octocat")
    assert _bodies(tokens)[1] == {
        "repositories": ["one"],
        "permissions": {"metadata": "read", "contents": "read", "issues": "write"},
    }


def test_narrowed_never_asks_for_more_than_granted_or_needed() -> None:
    granted = {"contents": "admin", "issues": "read", "administration": "write", "checks": 3}
    assert narrowed(TASK_PERMISSIONS, granted) == {"contents": "write", "issues": "read"}
    assert "workflows" not in TASK_PERMISSIONS and "administration" not in TASK_PERMISSIONS


def test_the_token_request_refuses_a_name_that_is_not_owner_slash_name() -> None:
    with pytest.raises(ValueError, match="owner/name"):
        token_request(RepoRef(ForgeKind.GITHUB, "octo-org/one/extra"))


def test_the_app_manifest_asks_for_what_a_task_token_uses() -> None:
    manifest = Path(__file__).resolve().parents[2] / "deploy" / "github-app-manifest.json"
    asked = json.loads(manifest.read_text(encoding="utf-8"))["default_permissions"]
    assert asked == dict(TASK_PERMISSIONS)
