"""An operator controls tasks without the issue: the emergency stop (pause-all /
resume-all) and one task's stop / pause / resume / retry, from the CLI on the store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot import cli, cli_tasks
from bot.storage.base import TaskState
from bot.worker import operator
from tests.agent import docs
from tests.e2e.support import (
    GH_BRANCH,
    SteeredLLM,
    gh_comment,
    gh_labeled,
    github_repo,
    of_kind,
    settle,
    two_writes,
    use_llm,
)
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox


async def test_pause_all_pauses_running_tasks_holds_queued_ones_and_resume_all_finishes_both(
    tmp_path: Path, remote: Remote
) -> None:
    one_task = [*two_writes(), docs.completion()]
    async with Harness(tmp_path) as bot:
        llm = use_llm(bot, SteeredLLM(one_task + one_task))
        first = github_repo(bot, remote)
        repo = first.ref.repo
        bot.github.add_issue(repo, 2, title="Second", author="Codertocat")
        second = bot.github.issue(repo, 2)

        async def emergency() -> None:
            # While the first task runs: the operator pulls the switch, and a second
            # issue is labelled (its webhook is still received and its task stored).
            switch = await operator.pause_all(bot.store, by="ops (bot CLI)")
            assert switch.paused and len(switch.tasks) == 1
            response = await bot.send_github("issues", gh_labeled(number=2, title="Second"))
            assert response.status_code == 202

        llm.before[2] = emergency
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        one, two = sorted(await bot.tasks(), key=lambda t: t.created_at)
        assert one.state is TaskState.PAUSED  # at its next safe point, its work kept
        assert two.state is TaskState.QUEUED  # stored, not started
        assert first.labels == ["coding agent paused"]
        [paused] = of_kind(first, "paused")
        assert "ops (bot CLI)" in paused
        ready = await bot.client.get("/readyz")
        assert ready.status_code == 200  # webhooks are still taken
        assert ready.text.startswith("ready; all tasks paused by ops (bot CLI) since ")
        assert len(llm.requests) == 2  # nothing asked of the model while paused

        resumed = await operator.resume_all(bot.store, by="ops (bot CLI)")
        assert resumed == [one.id]
        await settle(bot)

        states = {t.id: t.state for t in await bot.tasks()}
        assert states == {one.id: TaskState.DONE, two.id: TaskState.DONE}
        assert (await bot.client.get("/readyz")).text == "ready"
        assert remote.show(GH_BRANCH, "b.txt") == b"B\n"
        assert second.labels[-1] == "coding agent done"
        assert len(llm.requests) == 6  # the first task's 2, 1 after resuming; the second's 3


async def test_a_person_paused_task_is_not_resumed_by_resume_all(
    tmp_path: Path, remote: Remote
) -> None:
    async with Harness(tmp_path) as bot:
        llm = use_llm(bot, SteeredLLM([*two_writes(), docs.completion()]))

        async def person_pauses() -> None:
            await bot.send_github("issue_comment", gh_comment("/agent pause"))
            await bot.dispatch_all()

        llm.before[2] = person_pauses
        github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.PAUSED

        await operator.pause_all(bot.store, by="ops")
        assert await operator.resume_all(bot.store, by="ops") == []
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.PAUSED  # the person's pause stands


async def run_cli(argv: list[str]) -> int:
    return await asyncio.to_thread(cli.main, argv)  # the CLI runs its own event loop


async def test_cli_controls_a_task_by_the_start_of_its_id(
    tmp_path: Path,
    remote: Remote,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with Harness(tmp_path) as bot:
        use_llm(bot, SteeredLLM([*two_writes(), docs.completion()]))
        github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await bot.dispatch_all()
        [task] = await bot.tasks()
        assert task.state is TaskState.QUEUED
        # The CLI opens the same SQLite store itself, as it would beside a running server.
        monkeypatch.setenv("BOT_DATA_DIR", str(bot.settings.data_dir))
        monkeypatch.setattr(cli_tasks, "_operator", lambda: "ops (bot CLI)")
        monkeypatch.setattr(cli, "_logging", lambda settings: None)

        assert await run_cli(["tasks", "stop", task.id[:8]]) == 0
        assert "stop sent" in capsys.readouterr().out
        assert await run_cli(["tasks", "show", task.id[:8]]) == 0
        shown = capsys.readouterr().out
        assert f"task      {task.id}" in shown and "state     queued" in shown
        assert await run_cli(["tasks", "retry", task.id[:8]]) == 1
        assert "has an active task" in capsys.readouterr().err
        assert await run_cli(["tasks", "pause", "nosuchtask"]) == 1
        assert "no task 'nosuchtask'" in capsys.readouterr().err
        assert await run_cli(["tasks", "list", "--state", "queued"]) == 0
        assert task.id[:8] in capsys.readouterr().out

        [message] = await bot.store.messages_after(task.id, 0)
        assert message.payload == {"name": "stop", "args": "", "author": "ops (bot CLI)"}
        await settle(bot)
        [stopped] = await bot.tasks()
        assert stopped.state is TaskState.STOPPED and stopped.error == "stopped by ops (bot CLI)"

        assert await run_cli(["tasks", "retry", task.id[:8]]) == 0
        assert "queued" in capsys.readouterr().out
        retried = [t for t in await bot.tasks() if t.id != task.id]
        assert [t.request.previous_task_id for t in retried] == [task.id]
        assert retried[0].request.requested_by == "ops (bot CLI)"
