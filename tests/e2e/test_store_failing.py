"""A store that keeps failing triggers the emergency stop with a message, instead of
failing tasks one by one (specification 003, 6): the running task pauses and says why in
its issue, the worker leases nothing more, the stop is set in the store once it answers
again, and ``resume-all`` lets the task finish."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.storage import retry
from bot.storage.base import TaskState
from bot.worker import operator
from bot.worker.loop import STORE_HALT
from tests.agent import docs
from tests.e2e.support import (
    SteeredLLM,
    gh_labeled,
    github_repo,
    of_kind,
    settle,
    status_comment,
    use_llm,
)
from tests.harness import Harness
from tests.tools.conftest import Remote

pytestmark = pytest.mark.sandbox


def _plan() -> dict[str, object]:
    action = docs.action("task_1", "write_file", arguments={"path": "NOTES.md", "content": "x\n"})
    return docs.plan([action], objective="Write NOTES.md")


async def test_a_failing_store_pauses_the_task_and_sets_the_emergency_stop(
    tmp_path: Path, remote: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retry, "DELAYS", (0.01, 0.02, 0.04))
    overrides = {"worker": {"lease_seconds": 1}}
    async with Harness(tmp_path, overrides=overrides) as bot:
        issue = github_repo(bot, remote, labels=("coding agent",))

        async def database_goes_away() -> None:
            await bot.store.close()

        script = [_plan(), _plan(), docs.completion(done=1)]
        use_llm(bot, SteeredLLM(script, {1: database_goes_away}))
        await bot.send_github("issues", gh_labeled())
        await bot.dispatch_all()
        [task] = await bot.tasks()
        leased = await bot.worker.lease_next()
        assert leased is not None
        outcome = await bot.worker.run_task(leased)

        assert outcome.state is TaskState.PAUSED
        [paused] = of_kind(issue, "end-paused")
        assert "database failed every retry" in paused and "`bot resume-all`" in paused
        assert issue.labels == ["coding agent paused"]
        assert "⏸️ Paused" in status_comment(issue)
        assert await bot.worker.lease_next() is None  # halted, without asking the store

        await bot.store.open()  # the database is back
        assert await bot.worker.lease_next() is None  # still stopped until resume-all
        await bot.worker.maintain()
        switch = await operator.read_switch(bot.store)
        assert switch.paused and switch.by == STORE_HALT and task.id in switch.tasks
        assert await bot.worker.lease_next() is None

        assert await operator.resume_all(bot.store, by="alice") == [task.id]
        await asyncio.sleep(1.1)  # the lease of the run that could not store its outcome
        await bot.worker.maintain()
        await settle(bot)
        [task] = await bot.tasks()
        assert task.state is TaskState.DONE, task
