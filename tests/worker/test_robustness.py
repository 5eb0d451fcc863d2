"""The worker survives what goes wrong around it and never runs a task twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.agent.session import TaskContext
from bot.events import EvalRef, ForgeKind, IssueRef, RepoRef, TaskRequest
from bot.forges.base import ForgeError, NotFound
from bot.run_events import Outcome
from bot.storage.base import TaskState
from tests.harness import Harness

REPO = RepoRef(ForgeKind.GITHUB, "octo/hello", scope_id="1")


async def seed(bot: Harness) -> str:
    bot.github.add_repo("octo/hello")
    bot.github.add_issue(REPO, 1, title="Fix it")
    task, _ = await bot.store.create_task(
        TaskRequest(issue=IssueRef(REPO, 1, title="Fix it"), requested_by="alice")
    )
    return task.id


class Hang:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def run(self, ctx: TaskContext) -> Outcome:
        self.started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return Outcome(TaskState.DONE)


async def test_losing_the_lease_cancels_the_run_and_stores_nothing(tmp_path: Path) -> None:
    hang = Hang()
    async with Harness(tmp_path, coordinator_factory=lambda: hang) as bot:
        task_id = await seed(bot)
        lease = bot.settings.worker.model_copy(update={"lease_seconds": 5})
        bot.runtime.settings = bot.settings.model_copy(update={"worker": lease})
        task = await bot.store.lease_task(bot.worker.owner, 5)
        assert task is not None
        running = asyncio.create_task(bot.worker.run_task(task))
        await hang.started.wait()
        # Another worker takes the task over (as after a long outage of this one).
        await bot.store.set_state(task_id, TaskState.QUEUED)
        thief = await bot.store.lease_task("other-worker", 60)
        assert thief is not None and thief.id == task_id
        outcome = await asyncio.wait_for(running, 10)
        assert hang.cancelled
        assert outcome.reason == "lease lost"
        stored = await bot.store.get_task(task_id)
        assert stored is not None
        assert stored.state is TaskState.RUNNING and stored.lease_owner == "other-worker"


class Boom:
    async def run(self, ctx: TaskContext) -> Outcome:
        raise NotFound("issue 1 not found", status=404)


async def test_a_gone_issue_fails_the_task_instead_of_retrying_forever(tmp_path: Path) -> None:
    async with Harness(tmp_path, coordinator_factory=Boom) as bot:
        task_id = await seed(bot)
        await bot.run_queued()
        stored = await bot.store.get_task(task_id)
        assert stored is not None and stored.state is TaskState.FAILED
        assert stored.error is not None and "not found" in stored.error


class Flaky:
    async def run(self, ctx: TaskContext) -> Outcome:
        raise ForgeError("502 Bad Gateway", status=502)


async def test_transient_forge_errors_back_off_then_give_up(tmp_path: Path) -> None:
    now = [1_700_000_000.0]
    async with Harness(tmp_path, coordinator_factory=Flaky, clock=lambda: now[0]) as bot:
        task_id = await seed(bot)
        waits = []
        for _ in range(6):
            assert len(await bot.run_queued(limit=1)) == 1
            stored = await bot.store.get_task(task_id)
            assert stored is not None
            if stored.state is TaskState.FAILED:
                break
            assert stored.state is TaskState.QUEUED
            assert stored.wake_at is not None
            waits.append(stored.wake_at - now[0])
            now[0] = stored.wake_at
        assert waits == [30.0, 60.0, 120.0, 240.0, 480.0]
        assert stored.state is TaskState.FAILED and "gave up" in (stored.error or "")


async def test_maintenance_never_requeues_a_task_someone_just_leased(tmp_path: Path) -> None:
    async with Harness(tmp_path) as bot:
        task_id = await seed(bot)
        await bot.store.set_state(task_id, TaskState.AWAITING_APPROVAL, wake_at=0.0)
        due = await bot.store.due_tasks(1e12)
        assert [t.id for t in due] == [task_id]
        await bot.store.set_state(task_id, TaskState.QUEUED)
        assert await bot.store.lease_task("w2", 60) is not None
        await bot.worker.maintain()  # sees the stale "due" task only through the store
        stored = await bot.store.get_task(task_id)
        assert stored is not None and stored.state is TaskState.RUNNING


async def test_an_event_that_crashes_the_dispatcher_is_retried_then_dropped(
    tmp_path: Path,
) -> None:
    async with Harness(tmp_path) as bot:
        assert await bot.store.record_delivery("k", "github", {"forge": "github"})

        async def crash(item: object) -> None:
            raise RuntimeError("bug")

        bot.worker.dispatcher.handle = crash  # type: ignore[method-assign,assignment]
        assert await bot.worker.dispatch_once() is True
        assert await bot.store.pending_events() == 1  # given back, not lost
        event = await bot.store.lease_event("x", 1)
        assert event is None  # ...after a delay


async def test_an_evaluation_task_on_a_worker_without_the_hook_fails_saying_where_it_runs(
    tmp_path: Path,
) -> None:
    """`bot run` and `bot action` build workers without `bot eval`'s hook: a queued
    evaluation task they lease is failed with the reason, never run on the real forge."""
    async with Harness(tmp_path) as bot:
        bot.github.add_repo("octo/hello")
        request = TaskRequest(issue=IssueRef(REPO, 1, title="Fix it"), requested_by="eval",
                              evaluation=EvalRef(str(tmp_path / "run"), "t-1"))  # fmt: skip
        task, _ = await bot.store.create_task(request)
        await bot.run_queued()
        stored = await bot.store.get_task(task.id)
        assert stored is not None and stored.state is TaskState.FAILED
        assert stored.error == (
            "an evaluation task runs only on a worker of `bot serve` (docs/eval.md)"
        )
        assert stored.request.evaluation == EvalRef(str(tmp_path / "run"), "t-1")  # as stored
        assert bot.github.calls == []  # nothing asked of, or posted on, the real forge
