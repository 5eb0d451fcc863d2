"""``GET /api/status`` (the figures the overview shows), ``POST /api/tickets`` (an issue
opened labelled to start a task) and ``POST /api/tasks/{id}/answer``, through the real app
behind the bearer token."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bot.events import TaskMode, TaskRequest
from bot.storage.base import TaskState
from bot.worker import operator
from tests.e2e.support import github_repo, run_labelled_issue
from tests.e2e.test_api import AUTH, TOKEN, WITH_API
from tests.e2e.test_approval import write_plan
from tests.e2e.test_success import readme_script
from tests.harness import Harness
from tests.tools.conftest import Remote
from tests.tools.test_mcp import FIXTURE

pytestmark = pytest.mark.sandbox


async def test_status_counts_what_the_overview_shows(tmp_path: Path, remote: Remote) -> None:
    async with Harness(tmp_path, script=readme_script(), overrides=WITH_API) as bot:
        assert (await bot.client.get("/api/status")).status_code == 401
        await run_labelled_issue(bot, remote)  # (the rates are read at most once a minute)
        await operator.pause_all(bot.store, by="ops")
        status = (await bot.client.get("/api/status", headers=AUTH)).json()
        assert status["tasks_by_state"]["done"] == 1 and status["tasks_by_state"]["queued"] == 0
        assert [(r["window"], r["ended"], r["done"], r["success_rate"]) for r in status["rates"]] \
            == [("24 h", 1, 1, 1.0), ("7 days", 1, 1, 1.0)]  # fmt: skip
        assert status["model"]["reachable"] is True and status["model"]["ready"] is True
        assert (
            status["emergency_stop"]["paused"] is True and status["emergency_stop"]["by"] == "ops"
        )

        # A task a worker holds: its lease, alive, and how old it is.
        repo = bot.github.issue(next(iter(bot.github.repos.values())).ref, 1).ref.repo
        bot.github.add_issue(repo, 2, title="Another", author="Codertocat")
        await operator.resume_all(bot.store, by="ops")
        issue = bot.github.issue(repo, 2).ref
        await bot.store.create_task(TaskRequest(issue=issue, requested_by="x", mode=TaskMode.RUN))
        queued = (await bot.client.get("/api/status", headers=AUTH)).json()
        assert queued["queue_depth"] == 1
        leased = await bot.store.lease_task("host-1:slot-0", 60)
        assert leased is not None
        held = (await bot.client.get("/api/status", headers=AUTH)).json()
        [worker] = held["workers"]
        assert worker["owner"] == "host-1:slot-0" and worker["task_id"] == leased.id
        assert worker["alive"] is True and 0 <= worker["lease_age"] < 5
        assert held["busy"] == 1 and held["queue_depth"] == 0
        assert held["tasks_by_state"]["running"] == 1

        # The dashboard's overview shows the same numbers.
        await _login(bot)  # the client keeps the cookie
        page = await bot.client.get("/dashboard/live.json")
        assert page.json()["busy"] == 1 and page.json()["queued"] == 0
        assert page.json()["rates"][0]["success"] == "100%"


async def _login(bot: Harness) -> None:
    answer = await bot.client.post("/dashboard/login", data={"token": TOKEN})
    assert answer.status_code == 303 and "bot_dashboard" in answer.cookies


async def test_a_ticket_opens_a_labelled_issue_and_starts_its_task(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        github_repo(bot, remote)
        body = {"forge": "github", "repository": "Codertocat/Hello-World", "title": "Add CI",
                "body": "A workflow running make test."}  # fmt: skip
        assert (await bot.client.post("/api/tickets", json=body)).status_code == 401
        made = await bot.client.post("/api/tickets", json=body, headers=AUTH)
        assert made.status_code == 201, made.text
        ticket = made.json()
        assert ticket["label"] == "coding agent" and ticket["number"] == 2
        opened = [i for i in bot.github.issues.values() if i.ref.title == "Add CI"]
        assert len(opened) == 1 and opened[0].labels == ["coding agent"]
        assert opened[0].ref.body == "A workflow running make test."
        [task] = await bot.tasks()
        assert task.id == ticket["task_id"] and task.state is TaskState.QUEUED
        assert task.request.issue.number == 2 and task.request.requested_by == "ops (API)"

        for wrong, status in [
            ({**body, "repository": "nobody/nothing"}, 404),
            ({**body, "forge": "gitlab"}, 404),  # not configured here
            ({**body, "title": ""}, 422),
            ({**body, "repository": "no-slash"}, 422),
        ]:
            refused = await bot.client.post("/api/tickets", json=wrong, headers=AUTH)
            assert refused.status_code == status, (wrong, refused.text)
        assert len(await bot.tasks()) == 1


async def test_an_answer_reaches_a_waiting_task(tmp_path: Path, remote: Remote) -> None:
    async with Harness(tmp_path, script=[write_plan()], overrides=WITH_API) as bot:
        github_repo(bot, remote)
        issue = "https://github.com/Codertocat/Hello-World/issues/1"
        started = await bot.client.post(
            "/api/tasks", json={"issue_url": issue, "mode": "plan"}, headers=AUTH
        )
        task_id = started.json()["task_id"]
        text = {"text": "Use the docs/ folder."}
        sent = await bot.client.post(f"/api/tasks/{task_id}/answer", json=text, headers=AUTH)
        assert sent.status_code == 200 and sent.json()["action"] == "answer"
        [message] = await bot.store.messages_after(task_id, 0)
        assert message.payload == {"author": "ops (API)", "body": "Use the docs/ folder."}
        empty = await bot.client.post(
            f"/api/tasks/{task_id}/answer", json={"text": "  "}, headers=AUTH
        )
        assert empty.status_code == 409
        unknown = await bot.client.post("/api/tasks/nope/answer", json=text, headers=AUTH)
        assert unknown.status_code == 404


async def test_extensions_lists_each_mcp_server_with_its_state_and_tools(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-server"
    (tmp_path / "config.yaml").write_text(
        "mcp_servers:\n"
        f"  - {{name: fx, command: {sys.executable}, args: [{FIXTURE}, stdio], timeout: 30}}\n"
        f"  - {{name: gone, command: {missing}, timeout: 5}}\n"
    )
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        assert (await bot.client.get("/api/extensions")).status_code == 401
        answer = await bot.client.get("/api/extensions", headers=AUTH)
        assert answer.status_code == 200, answer.text
        fx, gone = answer.json()["extensions"]
        assert (fx["name"], fx["transport"], fx["state"], fx["error"]) == (
            "fx", "stdio", "ready", ""
        )  # fmt: skip
        assert fx["tools"] and all(t["name"].startswith("fx_") for t in fx["tools"])
        assert gone["state"] == "unavailable" and gone["error"] and gone["tools"] == []

        # The settings page shows the same.
        await _login(bot)
        page = (await bot.client.get("/dashboard/settings")).text
        assert fx["tools"][0]["name"] in page and "unavailable" in page


async def test_a_form_with_too_many_fields_is_refused_not_a_server_error(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides=WITH_API) as bot:
        crowded = {f"f{n}": "x" for n in range(50)}
        login = await bot.client.post("/dashboard/login", data={**crowded, "token": TOKEN})
        assert login.status_code == 401  # read as no form: a wrong login, not a crash
        await _login(bot)
        same_site = {"Origin": "http://bot.test"}
        many = await bot.client.post("/dashboard/new", data=crowded, headers=same_site)
        assert many.status_code == 413 and "too large" in many.text
        assert await bot.tasks() == []


@pytest.mark.parametrize(
    ("repository", "valid"),
    [("octo/repo", True), ("group/sub/project", True), ("octo/re\x85po", True),
     ("octo/re po", False), ("octo/re\tpo", False), ("/octo", False), ("octo", False)],
)  # fmt: skip
def test_a_ticket_s_repository_is_judged_as_its_schema_says(repository: str, valid: bool) -> None:
    """The pattern in the OpenAPI description (ECMA-262) and pydantic's agree: U+0085 is a
    space to one and not the other, so the pattern names its spaces (the schema run found it)."""
    import re

    from pydantic import ValidationError

    from bot.api.models import NewTicket

    pattern = NewTicket.model_json_schema()["properties"]["repository"]["pattern"]
    assert bool(re.fullmatch(pattern, repository, flags=re.ASCII)) is valid
    try:
        NewTicket.model_validate({"forge": "github", "repository": repository, "title": "t"})
    except ValidationError:
        assert not valid
    else:
        assert valid
