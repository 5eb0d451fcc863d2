"""Helpers for the store tests: a movable clock, task requests, the backend under test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from bot.events import ForgeKind, IssueRef, RepoRef, TaskRequest
from bot.storage.base import TaskState
from bot.storage.sql_store import SqlStore

START = 1_700_000_000.0


class Clock:
    """Epoch seconds that move only when a test says so."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def request_for(
    number: int, *, repo: str = "octo/widgets", forge: ForgeKind = ForgeKind.GITHUB
) -> TaskRequest:
    issue = IssueRef(
        repo=RepoRef(forge=forge, full_name=repo, scope_id="42", default_branch="main"),
        number=number,
        title=f"Issue {number}",
        body="Please fix the widget.",
        labels=("coding agent",),
    )
    return TaskRequest(issue=issue, requested_by="alice", instructions="be careful")


async def state_of(store: SqlStore, task_id: str) -> TaskState:
    task = await store.get_task(task_id)
    assert task is not None, f"task {task_id} is missing"
    return task.state


async def leased_id(store: SqlStore, owner: str = "worker") -> str | None:
    task = await store.lease_task(owner, 30)
    return None if task is None else task.id


@dataclass
class Backend:
    """One database under test: make more stores on it, or reach it directly."""

    name: str
    make: Callable[[Clock], SqlStore]
    execute: Callable[[str], None]  # raw SQL, to inject failures the store cannot cause


@contextlib.asynccontextmanager
async def opened(store: SqlStore) -> AsyncIterator[SqlStore]:
    await store.open()
    try:
        yield store
    finally:
        await store.close()


# A trigger that makes every task insert fail, to prove a transaction rolls back whole.
REFUSE_TASK_INSERTS = {
    "sqlite": """
        CREATE TRIGGER refuse_tasks BEFORE INSERT ON tasks
        BEGIN SELECT RAISE(ABORT, 'task inserts refused by the test'); END;
    """,
    "postgres": """
        CREATE FUNCTION refuse_tasks() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'task inserts refused by the test'; END $$;
        CREATE TRIGGER refuse_tasks BEFORE INSERT ON tasks
        FOR EACH ROW EXECUTE FUNCTION refuse_tasks();
    """,
}
