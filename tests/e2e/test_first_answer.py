"""The first answer in the issue comes at once: on a repository's first task, with the
forge's real write pacing (one write a second), the status comment is up within 3 s of
the trigger; the lifecycle labels are created when they are first needed, after it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bot.forges.retry import WritePacer
from bot.storage.base import TaskState
from tests.e2e.support import (
    GH_REPO,
    gh_labeled,
    github_repo,
    origin,
    settle,
    status_comment,
    wait_until,
)
from tests.harness import Harness

FIRST_ANSWER_SECONDS = 3.0


def _status_posted(bot: Harness) -> Callable[[], Awaitable[bool]]:
    async def posted() -> bool:
        return _status_posted_at(bot) is not None

    return posted


def _status_posted_at(bot: Harness) -> float | None:
    for at, method, args in bot.github.timeline:
        if method == "create_comment" and "kind=status" in str(args[1]):
            return at
    return None


async def test_the_status_comment_comes_within_three_seconds_on_a_first_task(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path) as bot:  # no script: the run stops at its first model call
        github_repo(bot, labels=("coding agent",))
        bot.github.pacer = WritePacer()  # the adapters' own pacing: one write a second
        started = time.monotonic()
        response = await bot.send_github("issues", gh_labeled())
        assert response.status_code == 202
        await bot.dispatch_all()  # the 👀, then the task
        [task] = await bot.tasks()
        leased = await bot.worker.lease_next()
        assert leased is not None and leased.id == task.id
        run = asyncio.create_task(bot.worker.run_task(leased))
        try:
            # long enough to see how late it came without the fix (about 10 s)
            await wait_until(_status_posted(bot), 15.0)
            posted = _status_posted_at(bot)
        finally:
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
    assert posted is not None, "the status comment never came"
    assert posted - started < FIRST_ANSWER_SECONDS, f"{posted - started:.1f} s after the trigger"
    writes = [method for _, method, _ in bot.github.timeline if method != "get_issue"]
    first_write = writes.index("add_reaction")
    assert writes[first_write + 1] == "create_comment"  # nothing paced in between


async def test_labels_are_created_when_first_needed(tmp_path: Path) -> None:
    remote = origin(tmp_path)
    async with Harness(tmp_path) as bot:  # no script: the task ends needing a person
        issue = github_repo(bot, remote, labels=("coding agent",))
        await bot.send_github("issues", gh_labeled())
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.NEEDS_HUMAN
        created = [args[1] for args in bot.github.calls_of("ensure_label")]
        assert created == ["coding agent processing", "coding agent help needed"]
        assert set(bot.github.repos[GH_REPO].labels) == set(created)
        assert issue.labels == ["coding agent help needed"]
        assert status_comment(issue)
