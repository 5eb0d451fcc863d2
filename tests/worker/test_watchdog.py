"""The watchdog: a run that stops moving is logged with what it awaits, given back to
the queue, retried, and reported by /readyz while it is stuck."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from bot.config import ConfigError, load_settings
from bot.run_events import Outcome
from bot.storage.base import TaskState
from bot.worker.outcomes import MAX_TASK_ATTEMPTS
from tests.agent import docs
from tests.e2e.support import gh_labeled, github_repo, origin
from tests.fakes import FakeIssue
from tests.harness import Harness

WATCHED = {"worker": {"stall_seconds": 1}}


def one_write() -> list[object]:
    plan = docs.plan(
        [docs.action("task_1", "write_file", arguments={"path": "a.txt", "content": "A\n"})]
    )
    return [plan, docs.completion()]


async def queued_task(bot: Harness, tmp_path: Path) -> tuple[str, FakeIssue]:
    issue = github_repo(bot, origin(tmp_path), labels=("coding agent",))
    assert (await bot.send_github("issues", gh_labeled())).status_code == 202
    await bot.dispatch_all()
    [task] = await bot.tasks()
    return task.id, issue


async def test_a_forge_call_that_never_answers_is_logged_and_the_task_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with Harness(tmp_path, script=one_write(), overrides=WATCHED) as bot:
        task_id, _ = await queued_task(bot, tmp_path)
        bot.github.hang("get_repo_info")
        task = await bot.store.lease_task(bot.worker.owner, 60)
        assert task is not None
        started = time.monotonic()
        with caplog.at_level(logging.ERROR, logger="bot.worker"):
            outcome = await asyncio.wait_for(bot.worker.run_task(task), timeout=10)
        assert 1.0 <= time.monotonic() - started < 5.0
        assert outcome.state is TaskState.QUEUED
        assert "awaiting github (fake) get_repo_info" in outcome.reason
        [line] = [r.getMessage() for r in caplog.records if "stalled" in r.getMessage()]
        assert "get_repo_info" in line and "FakeForge._enter" in line
        stored = await bot.store.get_task(task_id)
        assert stored is not None and stored.state is TaskState.QUEUED
        assert stored.lease_owner is None  # the lease is given up
        assert stored.wake_at is not None and stored.wake_at > time.time()


@pytest.mark.sandbox  # the quality gate runs `make lint` in bubblewrap
async def test_a_stalled_task_runs_again_and_finishes(tmp_path: Path) -> None:
    async with Harness(tmp_path, script=one_write(), overrides=WATCHED) as bot:
        task_id, _ = await queued_task(bot, tmp_path)
        bot.github.hang("get_repo_info")  # the first look at the repository never answers
        task = await bot.store.lease_task(bot.worker.owner, 60)
        assert task is not None
        await asyncio.wait_for(bot.worker.run_task(task), timeout=10)
        await bot.store.set_state(task_id, TaskState.QUEUED)  # its retry time has come
        [again] = await bot.run_queued()
        stored = await bot.store.get_task(again.id)
        assert stored is not None and stored.state is TaskState.DONE


async def test_readyz_reports_a_stuck_worker_while_its_run_is_stuck(tmp_path: Path) -> None:
    async with Harness(tmp_path, script=one_write(), overrides=WATCHED) as bot:
        await queued_task(bot, tmp_path)
        bot.github.hang("get_repo_info")
        task = await bot.store.lease_task(bot.worker.owner, 60)
        assert task is not None
        # The watchdog cancels the run once it checks after the bound; readyz says "stuck"
        # between the two. Under load a request can outlast that window, so the watchdog
        # here waits until the test has seen the report (or 10 s), then does its work.
        seen = asyncio.Event()
        watch = bot.worker._watch

        async def after_the_report(*args: Any) -> Outcome:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(seen.wait(), 10)
            return await watch(*args)

        bot.worker._watch = after_the_report  # type: ignore[method-assign]
        run = asyncio.create_task(bot.worker.run_task(task))
        answers: list[tuple[int, str]] = []
        while not run.done() and not seen.is_set():
            response = await bot.client.get("/readyz")
            answers.append((response.status_code, response.text))
            if response.status_code == 503:
                seen.set()
            await asyncio.sleep(0.005)
        await run
        assert answers[0] == (200, "ready")
        stuck = [text for status, text in answers if status == 503]
        assert stuck, "readyz never reported the stuck worker"
        assert "worker stuck" in stuck[0] and "get_repo_info" in stuck[0]
        assert (await bot.client.get("/readyz")).status_code == 200  # retried: not stuck now


async def test_a_task_that_keeps_stalling_fails_and_says_so_on_the_issue(tmp_path: Path) -> None:
    async with Harness(tmp_path, script=one_write(), overrides=WATCHED) as bot:
        task_id, issue = await queued_task(bot, tmp_path)
        task = await bot.store.lease_task(bot.worker.owner, 60)
        assert task is not None
        task = dataclasses.replace(task, attempts=MAX_TASK_ATTEMPTS)
        bot.github.hang("get_repo_info")
        outcome = await asyncio.wait_for(bot.worker.run_task(task), timeout=10)
        assert outcome.state is TaskState.FAILED and "gave up" in outcome.reason
        stored = await bot.store.get_task(task_id)
        assert stored is not None and stored.state is TaskState.FAILED
        assert any("gave up" in c.body for c in issue.comments)
        assert "coding agent processing" not in issue.labels


def test_a_stall_bound_shorter_than_one_step_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("worker:\n  stall_seconds: 100\nsandbox:\n  timeout: 300\n")
    with pytest.raises(ConfigError, match=r"stall_seconds \(100\) must exceed"):
        load_settings({}, config)
