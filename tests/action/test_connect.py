"""The real parts of `bot action` from the environment's credentials: a GitHub App's
installation token is revoked when the run ends, whatever happened; the workflow's token
is left alone (GitHub revokes it with the job)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import respx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.action.connect import WORKFLOW_LOGIN, connect_github, identity
from bot.action.environment import ActionError, RunnerEnv, action_settings
from bot.config import Settings
from bot.events import ForgeKind, RepoRef
from bot.forges.base import Permission

REST = Path(__file__).resolve().parent.parent / "fixtures" / "github" / "rest"
REPO = RepoRef(ForgeKind.GITHUB, "octo-org/octo-docs")
API = "https://api.github.com"


def rest(name: str) -> Any:
    return json.loads((REST / f"{name}.json").read_text(encoding="utf-8"))


def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode("ascii")


def runner_and_settings(tmp_path: Path, **env: str) -> tuple[RunnerEnv, Settings]:
    environ = {
        "GITHUB_REPOSITORY": REPO.full_name,
        "GITHUB_EVENT_NAME": "issues",
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "RUNNER_TEMP": str(tmp_path),
        **env,
    }
    runner = RunnerEnv.from_environ(environ)
    return runner, action_settings(environ, runner)


@respx.mock(base_url=API, assert_all_called=False)
async def test_an_apps_token_is_revoked_when_the_run_ends_even_after_an_error(
    respx_mock: respx.MockRouter, tmp_path: Path
) -> None:
    runner, settings = runner_and_settings(tmp_path, GITHUB_APP_ID="12345",
                                           GITHUB_PRIVATE_KEY=pem())  # fmt: skip
    respx_mock.get("/repos/octo-org/octo-docs/installation").respond(json=rest("installation"))
    respx_mock.post("/app/installations/1/access_tokens").respond(
        201, json={"token": "ghs_run", "expires_at": "2099-01-01T00:00:00Z"}
    )
    respx_mock.get("/repos/octo-org/octo-docs/collaborators/octocat/permission").respond(
        json=rest("collaborator-permission")
    )
    respx_mock.get("/app").respond(json={**rest("integration"), "slug": "octo-agent"})
    revoke = respx_mock.delete("/installation/token").respond(204)
    with pytest.raises(RuntimeError, match="the run broke"):
        async with connect_github(settings, runner) as connection:
            assert await identity(connection.forge) == "octo-agent[bot]"
            assert await connection.forge.get_permission(REPO, "octocat") is Permission.ADMIN
            raise RuntimeError("the run broke")
    assert revoke.call_count == 1
    assert revoke.calls.last.request.headers["authorization"] == "token ghs_run"


@respx.mock(base_url=API, assert_all_called=False)
async def test_the_workflows_token_is_not_revoked_and_names_github_actions(
    respx_mock: respx.MockRouter, tmp_path: Path
) -> None:
    runner, settings = runner_and_settings(tmp_path, GITHUB_TOKEN="ghs_workflow")
    respx_mock.get("/user").respond(403, json={"message": "Resource not accessible by integration"})
    revoke = respx_mock.delete("/installation/token").respond(204)
    async with connect_github(settings, runner) as connection:
        assert await identity(connection.forge) == WORKFLOW_LOGIN
    assert not revoke.called


async def test_no_credentials_is_a_clear_error(tmp_path: Path) -> None:
    runner, settings = runner_and_settings(tmp_path)
    with pytest.raises(ActionError, match="pass `github_token`"):
        async with connect_github(settings, runner):
            pass


@respx.mock(base_url=API, assert_all_called=False)
async def test_an_apps_token_covers_the_workflows_repository_only(
    respx_mock: respx.MockRouter, tmp_path: Path
) -> None:
    runner, settings = runner_and_settings(tmp_path, GITHUB_APP_ID="12345",
                                           GITHUB_PRIVATE_KEY=pem())  # fmt: skip
    respx_mock.get("/repos/octo-org/octo-docs/installation").respond(json=rest("installation"))
    tokens = respx_mock.post("/app/installations/1/access_tokens").respond(
        201, json={"token": "ghs_run", "expires_at": "2099-01-01T00:00:00Z"}
    )
    respx_mock.get("/repos/octo-org/octo-docs/collaborators/octocat/permission").respond(
        json=rest("collaborator-permission")
    )
    respx_mock.delete("/installation/token").respond(204)
    async with connect_github(settings, runner) as connection:
        await connection.forge.get_permission(REPO, "octocat")
    body = json.loads(tokens.calls.last.request.content)
    assert body["repositories"] == ["octo-docs"]
    assert body["permissions"]["contents"] == "write"
    assert "workflows" not in body["permissions"]
