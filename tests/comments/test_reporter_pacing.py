"""The reporter drops its pending status edit when a run ends; when that edit was
sleeping out the pause between writes, the final status edit and the labels must
still go out (they used to wait for ever on the installation's write lock)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from bot.comments.reporter import IssueReporter
from bot.forges.retry import WritePacer
from bot.run_events import Outcome, PauseReason, ProgressKind, progress_event
from bot.storage.base import TaskState
from tests.e2e.support import gh_labeled, github_repo
from tests.fakes import FakeIssue
from tests.harness import Harness


async def test_the_final_status_goes_out_after_a_cancelled_paced_edit(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides={"comments": {"edit_interval": 0}}) as bot:
        issue = github_repo(bot, labels=("coding agent",))
        await bot.send_github("issues", gh_labeled())
        await bot.dispatch_all()
        [task] = await bot.tasks()
        reporter = IssueReporter(
            task, bot.github, settings=bot.runtime.settings, comment_ids=bot.runtime.store
        )
        await reporter.begin()
        bot.github.pacer = WritePacer(interval=0.5)
        # A milestone comment, then at once the coalesced status edit: it takes its
        # turn to write and sleeps out the rest of the pause after the milestone.
        await reporter.handle(progress_event(ProgressKind.NOTICE, {"text": "milestone"}))
        await asyncio.sleep(0.1)
        await asyncio.wait_for(reporter.end(Outcome(TaskState.DONE)), timeout=5.0)
        assert "coding agent done" in issue.labels
        assert "coding agent processing" not in issue.labels


async def _resumed_after_an_outage(bot: Harness) -> tuple[IssueReporter, FakeIssue, int]:
    """A task paused by an outage, its pause shown on the issue, now resumed: a new
    reporter for its next run, and the number of forge calls made so far."""
    issue = github_repo(bot, labels=("coding agent",))
    await bot.send_github("issues", gh_labeled())
    await bot.dispatch_all()
    [task] = await bot.tasks()
    first = IssueReporter(
        task, bot.github, settings=bot.runtime.settings, comment_ids=bot.runtime.store
    )
    await first.begin()
    paused = {"reason": PauseReason.LLM_UNAVAILABLE.value, "endpoint": "openai http://x"}
    await first.handle(progress_event(ProgressKind.PAUSED, paused))
    await first.end(Outcome(TaskState.PAUSED, pause=PauseReason.LLM_UNAVAILABLE))
    assert issue.labels == ["coding agent paused"]
    resumed = dataclasses.replace(task, error=PauseReason.LLM_UNAVAILABLE.value)
    return (
        IssueReporter(
            resumed, bot.github, settings=bot.runtime.settings, comment_ids=bot.runtime.store
        ),
        issue,
        len(bot.github.calls),
    )


WRITES = ("create_comment", "edit_comment", "add_labels", "remove_label")


async def test_a_resume_that_meets_the_same_outage_writes_nothing(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides={"comments": {"edit_interval": 0}}) as bot:
        reporter, issue, before = await _resumed_after_an_outage(bot)
        await reporter.begin()
        await reporter.handle(progress_event(ProgressKind.PHASE, {"phase": "execution"}))
        paused = {"reason": PauseReason.LLM_UNAVAILABLE.value}
        await reporter.handle(progress_event(ProgressKind.PAUSED, paused))
        await reporter.end(Outcome(TaskState.PAUSED, pause=PauseReason.LLM_UNAVAILABLE))
        writes = [name for name, _ in bot.github.calls[before:] if name in WRITES]
    assert writes == [] and issue.labels == ["coding agent paused"]


async def test_a_resume_shows_itself_once_the_run_moves_on(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides={"comments": {"edit_interval": 0}}) as bot:
        reporter, issue, _ = await _resumed_after_an_outage(bot)
        await reporter.begin()
        assert issue.labels == ["coding agent paused"]
        await reporter.handle(progress_event(ProgressKind.USAGE, {"total_tokens": 120}))
        assert issue.labels == ["coding agent processing"]  # the model answered
        await reporter.end(Outcome(TaskState.DONE))
    assert issue.labels == ["coding agent done"]


async def test_a_persons_pause_during_a_quiet_resume_is_announced(tmp_path: Path) -> None:
    async with Harness(tmp_path, overrides={"comments": {"edit_interval": 0}}) as bot:
        reporter, issue, _ = await _resumed_after_an_outage(bot)
        await reporter.begin()
        by_person = {"reason": PauseReason.PERSON.value, "by": "alice"}
        await reporter.handle(progress_event(ProgressKind.PAUSED, by_person))
        await reporter.end(Outcome(TaskState.PAUSED, pause=PauseReason.PERSON))
    pauses = [c.body for c in issue.comments if "/agent resume" in c.body]
    assert len(pauses) == 1 and issue.labels == ["coding agent paused"]
