"""The REST API under /api, through the real app: its token, tasks, reports, artifacts,
operator actions, and every refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.storage.base import TaskState
from tests.e2e.support import gh_comment, github_repo, run_labelled_issue, settle
from tests.e2e.test_success import NEW_README, readme_script
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

TOKEN = "api-token-for-tests-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WITH_API = {"server": {"api_token": SecretStr(TOKEN), "api_token_name": "ops"}}


async def test_without_a_token_configured_there_is_no_api(tmp_path: Path) -> None:
    async with Harness(tmp_path) as bot:
        for path in ("/api/tasks", "/api/openapi.json", "/api/pause-all"):
            assert (await bot.client.get(path, headers=AUTH)).status_code == 404


async def test_every_request_needs_the_token(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            response = await bot.client.get("/api/tasks", headers=headers)
            assert response.status_code == 401, headers
            assert response.headers["www-authenticate"] == "Bearer"
        refused = await bot.client.post("/api/pause-all", headers={"Authorization": "Bearer x"})
        assert refused.status_code == 401
        ok = await bot.client.get("/api/tasks", headers=AUTH)
        assert ok.status_code == 200 and ok.json()["tasks"] == []
        described = await bot.client.get("/api/openapi.json")
        assert described.status_code == 200  # the description itself holds no data
        assert "/tasks/{task_id}/{action}" in described.json()["paths"]


async def test_a_finished_task_its_plan_timeline_report_and_artifacts(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, script=readme_script(), overrides=WITH_API) as bot:
        task = await run_labelled_issue(bot, remote)

        page = (await bot.client.get("/api/tasks?state=done&forge=github", headers=AUTH)).json()
        assert [t["id"] for t in page["tasks"]] == [task.id] and page["total"] == 1
        other = await bot.client.get("/api/tasks?repository=someone/else", headers=AUTH)
        assert other.json()["total"] == 0

        shown = (await bot.client.get(f"/api/tasks/{task.id[:8]}", headers=AUTH)).json()
        assert shown["id"] == task.id and shown["state"] == "done"
        assert [(i["description"], i["status"]) for i in shown["plan"]] == [
            ("Read README.md", "done"),
            ("Add an Installation section", "done"),
        ]
        assert shown["tokens"] > 0 and shown["links"]["branch"].startswith("agent/")
        kinds = [entry["type"] for entry in shown["timeline"]]
        assert "plan" in kinds and kinds.index("plan") < kinds.index("completion")

        report = await bot.client.get(f"/api/tasks/{task.id}/report", headers=AUTH)
        assert report.status_code == 200 and "goal achieved" in report.text
        assert report.headers["content-type"].startswith("text/markdown")
        artifact = await bot.client.get(
            f"/api/tasks/{task.id}/artifacts/artifacts/README.md", headers=AUTH
        )
        assert artifact.status_code == 200 and artifact.text == NEW_README

        # Nothing outside the run directory, however the path is spelled.
        run_dir = bot.settings.data_dir / "runs" / task.id
        (run_dir / "escape").symlink_to(bot.settings.data_dir / "bot.sqlite3")
        for path in ("%2e%2e/%2e%2e/bot.sqlite3", "..%2F..%2Fbot.sqlite3", "escape",
                     "%2Fetc%2Fpasswd", "no-such-file"):  # fmt: skip
            refused = await bot.client.get(f"/api/tasks/{task.id}/artifacts/{path}", headers=AUTH)
            assert refused.status_code == 404, path
        unknown = await bot.client.get("/api/tasks/no-such-task", headers=AUTH)
        assert unknown.status_code == 404 and "no task" in unknown.json()["detail"]
        retried = await bot.client.post("/api/tasks/no-such-task/retry", headers=AUTH)
        assert retried.status_code == 404
        bad_action = await bot.client.post(f"/api/tasks/{task.id}/explode", headers=AUTH)
        assert bad_action.status_code == 422
        ended = await bot.client.post(f"/api/tasks/{task.id}/stop", headers=AUTH)
        assert ended.status_code == 409 and "has ended" in ended.json()["detail"]


async def test_actions_reach_the_task_as_commands_from_the_tokens_name(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await bot.dispatch_all()
        [task] = await bot.tasks()

        switched = await bot.client.post("/api/pause-all", headers=AUTH)
        assert switched.status_code == 200
        assert switched.json()["paused"] is True and switched.json()["by"] == "ops (API)"
        assert (await bot.client.get("/readyz")).text.startswith("ready; all tasks paused by ops")
        assert await settle(bot) == []  # queued, not started
        resumed = await bot.client.post("/api/resume-all", headers=AUTH)
        assert resumed.json()["paused"] is False

        stop = await bot.client.post(f"/api/tasks/{task.id}/stop", headers=AUTH)
        assert stop.status_code == 200 and stop.json()["by"] == "ops (API)"
        busy = await bot.client.post(f"/api/tasks/{task.id}/retry", headers=AUTH)
        assert busy.status_code == 409 and "active task" in busy.json()["detail"]
        await settle(bot)
        [stopped] = await bot.tasks()
        assert stopped.state is TaskState.STOPPED and stopped.error == "stopped by ops (API)"

        retry = await bot.client.post(f"/api/tasks/{task.id}/retry", headers=AUTH)
        assert retry.status_code == 200
        new = retry.json()["task_id"]
        assert new != task.id
        assert (await bot.client.get(f"/api/tasks/{new}", headers=AUTH)).json()["mode"] == "retry"


async def test_unknown_paths_and_methods_under_the_api_answer_as_problems(tmp_path: Path) -> None:
    """The router's own refusals speak the API's language (a JSON ``detail``)."""
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        missing = await bot.client.get("/api/no-such-thing", headers=AUTH)
        assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}
        wrong = await bot.client.delete("/api/tasks", headers=AUTH)
        assert wrong.status_code == 405 and wrong.json() == {"detail": "Method Not Allowed"}
        assert set(wrong.headers["allow"].split(", ")) == {"GET", "HEAD"}
        invalid = await bot.client.get("/api/tasks?limit=0", headers=AUTH)
        assert invalid.status_code == 422
        [problem] = invalid.json()["detail"]
        assert problem["loc"] == ["query", "limit"] and problem["type"] == "greater_than_equal"
