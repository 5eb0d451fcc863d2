"""Tasks started, stopped and rejected over the API, through the real app and the real
loop: the same one-active-task rule as the issue's commands, the token's name as the
requester, the model asked first, a run's files listed."""

from __future__ import annotations

import socket
from pathlib import Path

import msgspec
import pytest

from bot.llm.factory import make_llm
from bot.storage.base import TaskState
from tests.agent import docs
from tests.e2e.support import GH_BRANCH, bodies, github_repo, of_kind, settle
from tests.e2e.test_api import AUTH, WITH_API
from tests.e2e.test_approval import NOTES, write_plan
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

ISSUE_URL = "https://github.com/Codertocat/Hello-World/issues/1"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_task_started_over_the_api_is_rejected_with_a_reason_then_approved(
    tmp_path: Path, remote: Remote
) -> None:
    revised = docs.revision(
        [docs.action("task_2", "write_file", arguments={"path": "docs/NOTES.md", "content": NOTES},
                     purpose="Write docs/NOTES.md")],
        reason="put the notes under docs/ as asked",
    )  # fmt: skip
    script = [write_plan(), revised, docs.completion(done=1)]
    async with Harness(tmp_path, script=script, overrides=WITH_API) as bot:
        issue = github_repo(bot, remote)
        body = {"issue_url": ISSUE_URL, "mode": "plan", "instructions": "Keep it short."}
        started = await bot.client.post("/api/tasks", json=body, headers=AUTH)
        assert started.status_code == 201, started.text
        created = started.json()
        assert created["requested_by"] == "ops (API)" and created["state"] == "queued"
        assert created["mode"] == "plan" and created["issue_url"].endswith(
            "/Codertocat/Hello-World/issues/1"
        )
        task_id = created["task_id"]

        # One active task per issue, as for the issue's commands.
        again = await bot.client.post("/api/tasks", json=body, headers=AUTH)
        assert again.status_code == 409 and again.json()["task_id"] == task_id

        await settle(bot)
        [task] = await bot.tasks()
        assert (task.id, task.state) == (task_id, TaskState.AWAITING_APPROVAL)
        assert task.request.requested_by == "ops (API)"
        assert task.request.instructions == "Keep it short."
        assert "Keep it short." in bot.llm.requests[0].messages[-1].content

        reason = {"reason": "notes belong in docs/"}
        rejected = await bot.client.post(f"/api/tasks/{task_id}/reject", json=reason, headers=AUTH)
        assert rejected.status_code == 200 and rejected.json()["by"] == "ops (API)"
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.AWAITING_APPROVAL
        [revision] = of_kind(issue, "revision")
        assert "put the notes under docs/" in revision
        assert "notes belong in docs/" in bot.llm.requests[1].messages[-1].content  # the reason

        approved = await bot.client.post(f"/api/tasks/{task_id}/approve", headers=AUTH)
        assert approved.status_code == 200
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        assert remote.show(GH_BRANCH, "docs/NOTES.md").decode() == NOTES

        listed = await bot.client.get(f"/api/tasks/{task_id[:8]}/artifacts", headers=AUTH)
        assert listed.status_code == 200
        files = {f["path"]: f["size"] for f in listed.json()["files"]}
        run_dir = bot.settings.data_dir / "runs" / task_id
        assert "report.md" in files and "task.json" in files
        assert files["report.md"] == (run_dir / "report.md").stat().st_size
        for path in files:  # each one readable through the artifact route
            read = await bot.client.get(f"/api/tasks/{task_id}/artifacts/{path}", headers=AUTH)
            assert read.status_code == 200, path
        (run_dir / "escape").symlink_to(tmp_path)  # a link out is neither listed nor followed
        relisted = await bot.client.get(f"/api/tasks/{task_id}/artifacts", headers=AUTH)
        assert {f["path"] for f in relisted.json()["files"]} == set(files)


async def test_delete_stops_a_task_and_bad_requests_are_refused(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, script=[write_plan()], overrides=WITH_API) as bot:
        issue = github_repo(bot, remote)
        for url, status, says in [
            ("https://example.com/Codertocat/Hello-World/issues/1", 404, "neither the configured"),
            ("https://github.com/Codertocat/Hello-World/wiki", 404, "not a GitHub issue"),
            ("Codertocat/Hello-World#1", 422, "should match pattern"),
            ("https://github.com/Codertocat/Hello-World/issues/404", 404, "cannot be read"),
            ("https://github.com/Codertocat/../issues/1", 404, "'.' or '..' segments"),
        ]:
            refused = await bot.client.post("/api/tasks", json={"issue_url": url}, headers=AUTH)
            assert refused.status_code == status and says in str(refused.json()["detail"]), url
        unknown = await bot.client.post(
            "/api/tasks", json={"issue_url": ISSUE_URL, "owner": "me"}, headers=AUTH
        )
        assert unknown.status_code == 422 and "owner" in unknown.json()["detail"]
        assert await bot.tasks() == []

        started = await bot.client.post("/api/tasks", json={"issue_url": ISSUE_URL}, headers=AUTH)
        task_id = started.json()["task_id"]
        stopped = await bot.client.delete(f"/api/tasks/{task_id}", headers=AUTH)
        assert stopped.status_code == 200 and stopped.json()["action"] == "stop"
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.STOPPED and task.error == "stopped by ops (API)"
        again = await bot.client.delete(f"/api/tasks/{task_id}", headers=AUTH)
        assert again.status_code == 409 and "has ended" in again.json()["detail"]
        assert (await bot.client.delete("/api/tasks/nope", headers=AUTH)).status_code == 404

        issue.ref = msgspec.structs.replace(issue.ref, state="closed")
        closed = await bot.client.post("/api/tasks", json={"issue_url": ISSUE_URL}, headers=AUTH)
        assert closed.status_code == 409 and "is closed" in closed.json()["detail"]


async def test_one_issue_gets_one_active_task_whatever_the_case_of_its_address(
    tmp_path: Path, remote: Remote
) -> None:
    """The task is keyed as the forge names the repository (as its webhooks do), not as
    the address was typed: a second request in other letters is the same issue."""
    async with Harness(tmp_path, script=[write_plan()], overrides=WITH_API) as bot:
        github_repo(bot, remote)
        typed = "https://github.com/codertocat/HELLO-world/issues/1"
        started = await bot.client.post("/api/tasks", json={"issue_url": typed}, headers=AUTH)
        assert started.status_code == 201, started.text
        task_id = started.json()["task_id"]
        again = await bot.client.post("/api/tasks", json={"issue_url": ISSUE_URL}, headers=AUTH)
        assert again.status_code == 409 and again.json()["task_id"] == task_id
        [task] = await bot.tasks()
        assert task.issue_key == "github:Codertocat/Hello-World#issue/1"
        assert task.request.issue.repo.full_name == "Codertocat/Hello-World"


async def test_a_task_is_refused_with_the_set_up_steps_while_the_model_is_down(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        issue = github_repo(bot, remote)
        down = bot.settings.llm.model_copy(
            update={"provider": "openai", "base_url": f"http://127.0.0.1:{closed_port()}/v1",
                    "model": "qwen2.5-coder:7b", "max_retries": 0}
        )  # fmt: skip
        bot.runtime.llm = make_llm(down)  # a real client; nothing listens there
        refused = await bot.client.post("/api/tasks", json={"issue_url": ISSUE_URL}, headers=AUTH)
        assert refused.status_code == 503
        answer = refused.json()
        assert answer["detail"].startswith("the model is not ready")
        assert any("ollama pull qwen2.5-coder:7b" in step for step in answer["setup_steps"])
        assert answer["health"]["reachable"] is False
        assert await bot.tasks() == []  # nothing queued to pause at once
        assert bodies(issue) == []
