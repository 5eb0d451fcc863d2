"""A kill -9 of a worker process loses no queued or running task."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bot.agent.session import TaskContext
from bot.events import ForgeKind, IssueRef, RepoRef, TaskRequest
from bot.run_events import Outcome
from bot.storage.base import TaskState
from bot.storage.sqlite import SqliteStore
from tests.harness import ROOT, Harness

REPO = RepoRef(ForgeKind.GITHUB, "octo/hello", scope_id="1")


class QuickCoordinator:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict | None]] = []

    async def run(self, ctx: TaskContext) -> Outcome:
        self.seen.append((ctx.task.id, await ctx.store.load_checkpoint(ctx.task.id)))
        return Outcome(TaskState.DONE)


def wait_for(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


async def test_kill_9_mid_task_loses_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    store = SqliteStore(data_dir / "bot.sqlite3")
    await store.open()
    ids = []
    for number in (1, 2, 3):
        issue = IssueRef(REPO, number, title=f"issue {number}")
        task, created = await store.create_task(TaskRequest(issue=issue, requested_by="alice"))
        assert created
        ids.append(task.id)
    await store.close()

    marker = tmp_path / "started"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(  # noqa: ASYNC220 - a real process to kill
        [
            sys.executable,
            str(ROOT / "tests/worker/worker_proc.py"),
            str(data_dir),
            str(marker),
            str(ROOT / "config.yaml"),
        ],
        env=env,
        cwd=ROOT,
    )
    try:
        wait_for(lambda: marker.exists() and marker.read_text().strip() != "")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    running_id = marker.read_text().split()[0]

    store = SqliteStore(data_dir / "bot.sqlite3")
    await store.open()
    try:
        states = {t.id: t.state for t in await store.list_tasks()}
        assert states[running_id] is TaskState.RUNNING
        assert sorted(states) == sorted(ids)
        assert [s for i, s in states.items() if i != running_id] == [TaskState.QUEUED] * 2
    finally:
        await store.close()

    # A new worker, later than the dead one's lease: every task runs, the interrupted
    # one from its checkpoint.
    later = time.time() + 120
    async with Harness(tmp_path, clock=lambda: later) as bot:
        coordinator = QuickCoordinator()
        bot.coordinator_factory = lambda: coordinator
        bot.github.add_repo("octo/hello")
        for number in (1, 2, 3):
            bot.github.add_issue(REPO, number, title=f"issue {number}")
        assert await bot.store.requeue_expired() == 1
        ran = await bot.run_queued()
        assert sorted(t.id for t in ran) == sorted(ids)
        assert {t.state for t in await bot.tasks()} == {TaskState.DONE}
        checkpoints = dict(coordinator.seen)
        assert checkpoints[running_id] == {"step": 1}
