"""Fifty labelled tasks on one installation, with writes paced as the real adapters pace
them, status edits coalesced, milestones posted, and people stopping, pausing,
resuming and approving while the tasks run: every task reaches a terminal label.

A write cancelled during its pacing wait (the reporter drops its pending status edit
right after a milestone comment) used to keep the installation's write lock for ever,
so every later write of every task hung."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from bot.forges.retry import WritePacer
from bot.llm.base import HealthReport, LLMRequest, LLMResponse
from bot.llm.scripted import ScriptedLLM
from bot.storage.base import ACTIVE_STATES, TaskState
from tests.agent import docs
from tests.e2e.support import GH_REPO, ORIGIN_FILES, OWNER, gh_comment, gh_labeled
from tests.fakes import FakeIssue
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

TASKS = 50
TERMINAL = {"coding agent done", "coding agent stopped", "coding agent help needed"}
PLAN_ONLY, STOPPED, PAUSED = 0, 1, 2  # number % 5: how people steer the task


class PhaseLLM:
    """Answers every task alike, by phase: a plan with one write, then completion.
    (The scripted LLM replays one list in order; here many tasks ask at once.)"""

    name = "phases"

    def __init__(self) -> None:
        write = docs.action("task_1", "write_file", arguments={"path": "a.txt", "content": "A\n"})
        self.docs = {"planning": docs.plan([write]), "completion": docs.completion(done=1)}

    async def complete(self, request: LLMRequest) -> LLMResponse:
        await asyncio.sleep(0.01)  # a model takes a moment: commands arrive meanwhile
        return await ScriptedLLM([self.docs[request.phase]]).complete(request)

    async def health(self) -> HealthReport:
        return HealthReport(reachable=True, provider="phases", base_url="", model="phases")

    async def aclose(self) -> None:
        return None


def issues(bot: Harness, remote: Remote) -> dict[int, FakeIssue]:
    ref = bot.github.add_repo(GH_REPO, dict(ORIGIN_FILES), clone_url=remote.url, writers=(OWNER,))
    for number in range(1, TASKS + 1):
        bot.github.add_issue(ref, number, title=f"Task {number}", author=OWNER)
    return {n: bot.github.issue(ref, n) for n in range(1, TASKS + 1)}


def finished(issue: FakeIssue) -> bool:
    return bool(TERMINAL & set(issue.labels)) and "coding agent processing" not in issue.labels


async def start(bot: Harness, numbers: list[int]) -> None:
    """Start every task, and stop or pause some of them while they run."""
    for n in numbers:
        if n % 5 == PLAN_ONLY:
            await bot.send_github("issue_comment", gh_comment("/agent plan", number=n))
        else:
            await bot.send_github("issues", gh_labeled(number=n, title=f"Task {n}"))
    await asyncio.sleep(0.2)
    for n in numbers:
        if n % 5 == STOPPED:
            await bot.send_github("issue_comment", gh_comment("/agent stop", number=n))
        elif n % 5 == PAUSED:
            await bot.send_github("issue_comment", gh_comment("/agent pause", number=n))


async def answer(bot: Harness, by_number: dict[int, FakeIssue], answered: dict[int, float]) -> None:
    """Approve the plans that wait for it, resume what is paused (again after a while,
    as a person would when nothing happens)."""
    now = time.monotonic()
    for n, issue in by_number.items():
        if now - answered.get(n, 0.0) < 2.0:
            continue
        again = int(now * 1000)  # a person writing the same words again: a new comment
        if "coding agent waiting" in issue.labels:
            approve = gh_comment("/agent approve", number=n, again=again)
            await bot.send_github("issue_comment", approve)
        elif "coding agent paused" in issue.labels:
            resume = gh_comment("/agent resume", number=n, again=again)
            await bot.send_github("issue_comment", resume)
        else:
            continue
        answered[n] = now


async def test_fifty_steered_tasks_on_one_installation_all_reach_a_terminal_label(
    tmp_path: Path, remote: Remote
) -> None:
    overrides = {
        "worker": {"max_workers": 4, "poll_interval": 0.05},
        "comments": {"edit_interval": 0.02},
    }
    async with Harness(tmp_path, overrides=overrides) as bot:
        bot.runtime.llm = PhaseLLM()
        bot.github.pacer = WritePacer(interval=0.01)
        by_number = issues(bot, remote)
        await bot.worker.start()
        try:
            await start(bot, list(by_number))
            answered: dict[int, float] = {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                if all(finished(issue) for issue in by_number.values()):
                    break
                await answer(bot, by_number, answered)
        finally:
            await bot.worker.stop()
        stuck = {n: issue.labels for n, issue in by_number.items() if not finished(issue)}
        assert not stuck, f"tasks that never reached a terminal label: {stuck}"
        tasks = await bot.tasks()
        assert len(tasks) == TASKS
        assert not [t for t in tasks if t.state in ACTIVE_STATES]
        states = {t.state for t in tasks}
        assert TaskState.DONE in states and TaskState.STOPPED in states
        paced = bot.github.calls_of("edit_comment")
        assert len(paced) >= TASKS  # status edits went through the pacer all along
