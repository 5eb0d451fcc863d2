"""A worker killed mid-task: a fresh worker on the same store finishes it, posting nothing twice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.storage.base import TaskState
from bot.worker import Worker
from tests.agent import docs
from tests.agent.conftest import Clock
from tests.e2e.support import (
    GH_BRANCH,
    SteeredLLM,
    assert_no_duplicates,
    gh_comment,
    github_repo,
    of_kind,
    status_comment,
    status_edits,
    use_llm,
)
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox

BRANCH = GH_BRANCH


class WorkerKilled(BaseException):
    """Like KeyboardInterrupt or SIGKILL: nothing in the bot may catch it."""


def revising_script() -> list[object]:
    """Read a missing file (fails) -> reflection + revision -> read, then write via a call."""
    missing = docs.action("task_1", "github_get_file_contents", arguments={"path": "CHANGES.md"},
                          purpose="Read the changelog")  # fmt: skip
    read = docs.action("task_2", "github_get_file_contents", arguments={"path": "README.md"},
                       purpose="Read the README")  # fmt: skip
    write = docs.action("task_3", "write_file", purpose="Write the notes", dependencies=["task_2"])
    reflect = docs.reflection(
        "task_1", revise=True, reason="there is no CHANGES.md", updated=[read, write]
    )
    call = docs.execution("task_3", "write_file", {"path": "NOTES.md", "content": "notes\n"})
    return [docs.plan([missing]), reflect, call, docs.completion(done=2, failed=1)]


def nth_read(path: str, n: int) -> Callable[[tuple[Any, ...]], bool]:
    """The n-th read of ``path`` (the first is the planner's README excerpt)."""
    seen = 0

    def match(args: tuple[Any, ...]) -> bool:
        nonlocal seen
        if args[1] != path:
            return False
        seen += 1
        return seen == n

    return match


async def restart(bot: Harness, clock: Clock) -> Worker:
    """What a new worker process does: open the store from disk, re-queue the dead
    worker's expired lease, run the task from its checkpoint."""
    await bot.store.close()
    await bot.store.open()
    clock.advance(bot.settings.worker.lease_seconds + 1)
    fresh = Worker(bot.runtime, owner="second-worker")
    await fresh.maintain()
    task = await bot.store.lease_task(fresh.owner, 60)
    assert task is not None
    await fresh.run_task(task)
    return fresh


async def check_finished_once(bot: Harness, remote: Remote) -> None:
    issue = bot.github.issues[("Codertocat/Hello-World", 1)]
    [task] = await bot.tasks()
    assert task.state is TaskState.DONE, task.error
    assert_no_duplicates(issue)
    assert [len(of_kind(issue, k)) for k in ("status", "reflection", "revision", "completion")] == [
        1, 1, 1, 1,
    ]  # fmt: skip
    assert issue.labels == ["coding agent done"]
    assert "Progress: **2/3**" in status_comment(issue)
    assert remote.show(BRANCH, "NOTES.md") == b"notes\n"
    assert len(bot.github.repos["Codertocat/Hello-World"].change_requests) == 1


async def test_killed_while_the_model_thinks(tmp_path: Path, remote: Remote) -> None:
    clock = Clock(time.time())
    async with Harness(tmp_path, clock=clock) as bot:
        llm = use_llm(bot, SteeredLLM(revising_script()))

        async def kill() -> None:
            raise asyncio.CancelledError

        llm.before[3] = kill  # the execution call for task_3
        issue = github_repo(bot, remote)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await bot.dispatch_all()
        leased = await bot.store.lease_task(bot.worker.owner, 60)
        assert leased is not None
        with pytest.raises(asyncio.CancelledError):
            await bot.worker.run_task(leased)
        # the status comment, the reflection and the revision were out before the kill
        assert len(issue.comments) == 3
        assert len(of_kind(issue, "reflection")) == 1 and len(of_kind(issue, "revision")) == 1
        edits_before = status_edits(bot.github, issue)

        await restart(bot, clock)

        await check_finished_once(bot, remote)
        assert status_edits(bot.github, issue) > edits_before  # edited, not posted again


async def test_killed_inside_a_tool_call(tmp_path: Path, remote: Remote) -> None:
    clock = Clock(time.time())
    async with Harness(tmp_path, clock=clock) as bot:
        use_llm(bot, SteeredLLM(revising_script()))
        issue = github_repo(bot, remote)
        bot.github.fail("get_file", WorkerKilled(), when=nth_read("README.md", 2))
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await bot.dispatch_all()
        leased = await bot.store.lease_task(bot.worker.owner, 60)
        assert leased is not None
        with pytest.raises(WorkerKilled):
            await bot.worker.run_task(leased)
        assert len(of_kind(issue, "revision")) == 1

        await restart(bot, clock)

        await check_finished_once(bot, remote)


async def test_killed_between_posting_a_comment_and_recording_it(
    tmp_path: Path, remote: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(time.time())
    async with Harness(tmp_path, clock=clock) as bot:
        plan, reflect, *rest = revising_script()
        # the reflection's answer died with the worker: the new one asks again
        llm = use_llm(bot, SteeredLLM([plan, reflect, reflect, *rest]))
        issue = github_repo(bot, remote)
        record = bot.store.put_comment_id

        async def crash_after_posting(task_id: str, key: str, comment_id: int) -> None:
            if key == "reflection:1":
                monkeypatch.setattr(bot.store, "put_comment_id", record)
                raise WorkerKilled
            await record(task_id, key, comment_id)

        monkeypatch.setattr(bot.store, "put_comment_id", crash_after_posting)
        await bot.send_github("issue_comment", gh_comment("/agent run"))
        await bot.dispatch_all()
        leased = await bot.store.lease_task(bot.worker.owner, 60)
        assert leased is not None
        with pytest.raises(WorkerKilled):
            await bot.worker.run_task(leased)
        assert len(of_kind(issue, "reflection")) == 1 and of_kind(issue, "revision") == []

        await restart(bot, clock)

        await check_finished_once(bot, remote)
        assert [r.phase for r in llm.requests].count("reflection") == 2
