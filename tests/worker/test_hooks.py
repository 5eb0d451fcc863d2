"""A task a hook brings its parts for (``bot eval run --queue``'s): the hook is asked for
them once per run, and hears only the outcomes this worker stored."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from bot.agent.session import TaskContext
from bot.forges.base import Forge
from bot.run_events import Outcome
from bot.storage.base import Task, TaskState
from bot.worker.hooks import HookedRun
from bot.worker.outcomes import MAX_TASK_ATTEMPTS
from tests.harness import Harness
from tests.worker.test_robustness import seed


class Recording:
    """A hook that claims every task and keeps what it was asked."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.forge_of: Forge | None = None

    def claims(self, task: Task) -> bool:
        return True

    async def take(self, task: Task) -> HookedRun | Outcome:
        self.calls.append("take")
        assert self.forge_of is not None
        return HookedRun(forge=self.forge_of)

    async def forge(self, task: Task) -> Forge | None:
        self.calls.append("forge")
        return self.forge_of

    async def ended(self, task: Task, outcome: Outcome) -> None:
        self.calls.append(f"ended:{outcome.state.value}")


class Stalls:
    async def run(self, ctx: TaskContext) -> Outcome:
        await asyncio.sleep(3600)
        return Outcome(TaskState.DONE)


async def test_a_stalled_run_is_reported_through_the_hooks_forge_not_a_second_take(
    tmp_path: Path,
) -> None:
    hook = Recording()
    watched = {"worker": {"stall_seconds": 1}}
    async with Harness(tmp_path, overrides=watched, coordinator_factory=Stalls,
                       hook=hook) as bot:  # fmt: skip
        hook.forge_of = bot.github
        await seed(bot)
        task = await bot.store.lease_task(bot.worker.owner, 60)
        assert task is not None
        task = dataclasses.replace(task, attempts=MAX_TASK_ATTEMPTS)  # the last: it fails
        outcome = await asyncio.wait_for(bot.worker.run_task(task), timeout=10)
        assert outcome.state is TaskState.FAILED
        assert hook.calls == ["take", "forge", "ended:failed"]


class HandedOver:
    """A run that ends waiting after another worker took its task over."""

    def __init__(self, bot: Harness) -> None:
        self.bot = bot

    async def run(self, ctx: TaskContext) -> Outcome:
        await self.bot.store.set_state(ctx.task.id, TaskState.QUEUED)
        assert await self.bot.store.lease_task("other-worker", 60) is not None
        return Outcome(TaskState.AWAITING_INPUT, reason="a question")


async def test_an_outcome_a_lost_lease_kept_from_being_stored_is_not_the_hooks(
    tmp_path: Path,
) -> None:
    hook = Recording()
    async with Harness(tmp_path, hook=hook) as bot:
        bot.coordinator_factory = lambda: HandedOver(bot)
        hook.forge_of = bot.github
        task_id = await seed(bot)
        task = await bot.store.lease_task(bot.worker.owner, 60)
        assert task is not None
        await bot.worker.run_task(task)
        assert hook.calls == ["take"]  # no answer to a wait the other worker now holds
        stored = await bot.store.get_task(task_id)
        assert stored is not None and stored.lease_owner == "other-worker"
        assert stored.state is TaskState.RUNNING
