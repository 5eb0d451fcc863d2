"""The reporter drops its pending status edit when a run ends; when that edit was
sleeping out the pause between writes, the final status edit and the labels must
still go out (they used to wait for ever on the installation's write lock)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.agent.context import Outcome, ProgressEvent, ProgressKind
from bot.comments.reporter import IssueReporter
from bot.forges.retry import WritePacer
from bot.storage.base import TaskState
from tests.e2e.support import gh_labeled, github_repo
from tests.harness import Harness


async def test_the_final_status_goes_out_after_a_cancelled_paced_edit(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides={"comments": {"edit_interval": 0}}) as bot:
        issue = github_repo(bot, labels=("coding agent",))
        await bot.send_github("issues", gh_labeled())
        await bot.dispatch_all()
        [task] = await bot.tasks()
        reporter = IssueReporter(bot.runtime, task, bot.github)
        await reporter.begin()
        bot.github.pacer = WritePacer(interval=0.5)
        # A milestone comment, then at once the coalesced status edit: it takes its
        # turn to write and sleeps out the rest of the pause after the milestone.
        await reporter.handle(ProgressEvent(ProgressKind.NOTICE, {"text": "milestone"}))
        await asyncio.sleep(0.1)
        await asyncio.wait_for(reporter.end(Outcome(TaskState.DONE)), timeout=5.0)
        assert "coding agent done" in issue.labels
        assert "coding agent processing" not in issue.labels
