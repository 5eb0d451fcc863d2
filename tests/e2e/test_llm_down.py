"""The model endpoint goes away mid-task: one pause comment, label paused, resumed by
maintenance once the endpoint answers again, finished without repeating anything."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from bot.llm.base import LLMUnavailable
from bot.llm.factory import make_llm
from bot.storage.base import TaskState
from tests.agent import docs
from tests.agent.conftest import Clock
from tests.e2e.support import (
    GH_BRANCH,
    SteeredLLM,
    assert_no_duplicates,
    gh_comment,
    github_repo,
    of_kind,
    settle,
    status_comment,
    two_writes,
    use_llm,
)
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

BRANCH = GH_BRANCH


def goes_down(llm: SteeredLLM) -> object:
    async def hook() -> None:
        llm.down = True
        raise LLMUnavailable("connection refused")

    return hook


async def test_llm_down_mid_task_pauses_once_and_resumes_when_it_is_back(
    tmp_path: Path, remote: Remote
) -> None:
    clock = Clock(time.time())
    async with Harness(tmp_path, clock=clock) as bot:
        llm = use_llm(bot, SteeredLLM([*two_writes(), docs.completion()]))
        llm.before[2] = goes_down(llm)  # the execution call for task_2
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert (task.state, task.error) == (TaskState.PAUSED, "llm_unavailable")
        assert issue.labels == ["coding agent paused"]
        [paused] = of_kind(issue, "paused")
        assert paused.startswith("### ⏸️ Paused\nThe language model endpoint (scripted ")
        assert "My state is saved; I will resume by myself when it answers again." in paused
        status = status_comment(issue)
        assert status.startswith("### Coding agent — ⏸️ Paused\n") and "Progress: **1/2**" in status

        # still down: maintenance asks the endpoint, leaves the task paused for another
        # health interval and says nothing more
        interval = bot.settings.llm.health_interval
        assert task.wake_at is not None and task.wake_at <= time.time() + interval
        clock.advance(interval + 10)
        await bot.worker.maintain()
        [task] = await bot.tasks()
        assert (task.state, task.wake_at) == (TaskState.PAUSED, clock.now + interval)
        assert await bot.run_queued() == []
        assert len(bot.github.calls_of("create_comment")) == 2  # the status and the pause

        # back, but it fails again on the first call: still only one pause comment
        llm.down = False
        llm.before[3] = goes_down(llm)
        clock.advance(interval + 1)
        await bot.worker.maintain()
        assert len(await bot.run_queued()) == 1
        assert (await bot.tasks())[0].state is TaskState.PAUSED
        assert len(of_kind(issue, "paused")) == 1 and of_kind(issue, "end-paused") == []

        # back for good: maintenance re-queues and the task finishes where it stopped
        llm.down = False
        clock.advance(interval + 1)
        await bot.worker.maintain()
        await settle(bot)

        [task] = await bot.tasks()
        assert task.state is TaskState.DONE
        assert issue.labels == ["coding agent done"]
        assert len(of_kind(issue, "paused")) == 1 and len(of_kind(issue, "completion")) == 1
        assert_no_duplicates(issue)
        assert "Progress: **2/2**" in status_comment(issue)
        assert remote.show(BRANCH, "a.txt") == b"A\n" and remote.show(BRANCH, "b.txt") == b"B\n"
        assert [r.phase for r in llm.requests] == ["planning", "execution", "completion"]


async def test_a_task_asked_for_while_the_model_is_down_says_how_to_bring_it_back(
    tmp_path: Path, remote: Remote
) -> None:
    """The paused comment carries the set-up steps the health report gives (003 §5), not
    only the log: here a real client of an OpenAI-compatible server nobody started."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with Harness(tmp_path) as bot:
        down = bot.settings.llm.model_copy(
            update={"provider": "openai", "base_url": f"http://127.0.0.1:{port}/v1",
                    "model": "qwen2.5-coder:7b", "max_retries": 0}
        )  # fmt: skip
        bot.runtime.llm = make_llm(down)
        bot.runtime.settings = bot.settings = bot.settings.model_copy(update={"llm": down})
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await settle(bot)

        [task] = await bot.tasks()
        assert (task.state, task.error) == (TaskState.PAUSED, "llm_unavailable")
        [paused] = of_kind(issue, "paused")
        assert f"The language model endpoint (openai http://127.0.0.1:{port}/v1)" in paused
        assert "To bring it back:\n1. Start the OpenAI-compatible server that should listen" in (
            paused
        )
        assert "ollama pull qwen2.5-coder:7b" in paused
        assert f"Then set LLM_BASE_URL (currently http://127.0.0.1:{port}/v1)" in paused
