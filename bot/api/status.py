"""The bot's state in numbers, for programs (``GET /api/status``) and for the dashboard's
overview: one function (``gather``) so both show the same figures.

Workers are what the store knows of them: the lease owners of running tasks (a worker
process names each of its slots' leases), alive while their lease has not expired, busy
with the task they hold, and the lease's age (seconds since it was last taken or
renewed). ``slots``: this process's worker slots (0 on a web replica).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from pydantic import BaseModel, Field

from bot.api.models import ExtensionInfo, Extensions, ExtensionToolInfo
from bot.config.views import masked_url
from bot.dashboard.live import RatesCache
from bot.llm.base import HealthReport
from bot.storage.base import Task, TaskState
from bot.worker import operator
from bot.worker.extensions import Extension

MAX_LISTED = 10_000


class WorkerLease(BaseModel):
    owner: str = Field(description="the worker slot holding the lease")
    task_id: str = Field(description="the task it is busy with")
    alive: bool = Field(description="its lease has not expired")
    lease_age: float = Field(description="seconds since the lease was taken or renewed")
    expires_in: float = Field(description="seconds until the lease expires (negative: expired)")


class RateWindow(BaseModel):
    window: str
    ended: int = Field(description="tasks that ended within the window")
    done: int
    help_needed: int
    success_rate: float | None = Field(description="done / ended (null: none ended)")


class Status(BaseModel):
    workers: list[WorkerLease]
    busy: int = Field(description="worker slots busy with a task")
    slots: int = Field(description="worker slots (0: in worker processes only)")
    queue_depth: int = Field(description="tasks queued")
    tasks_by_state: dict[str, int]
    rates: list[RateWindow] = Field(description="over 24 h and 7 days")
    model: dict[str, object] = Field(description="the model's health (GET /health/ai)")
    emergency_stop: dict[str, object] = Field(description="paused, by, since, tasks")


def workers(running: list[Task], lease_seconds: float, now: float) -> list[WorkerLease]:
    """The worker leases of ``running`` tasks. Pure."""
    found = []
    for task in running:
        if task.lease_owner is None or task.lease_expires is None:
            continue
        left = task.lease_expires - now
        found.append(
            WorkerLease(
                owner=task.lease_owner,
                task_id=task.id,
                alive=left > 0,
                lease_age=round(max(0.0, lease_seconds - left), 1),
                expires_in=round(left, 1),
            )
        )
    return sorted(found, key=lambda w: w.owner)


async def gather(
    store: operator.OperatorStore,
    *,
    rates: RatesCache,
    llm_health: Callable[[], Awaitable[HealthReport]],
    slots: int,
    lease_seconds: float,
) -> Status:
    """Every figure the overview and ``GET /api/status`` show."""
    counts = {
        state.value: await store.count_tasks(states=frozenset({state})) for state in TaskState
    }
    running = await store.list_tasks(states=frozenset({TaskState.RUNNING}), limit=MAX_LISTED)
    leases = workers(running, lease_seconds, time.time())
    switch = await operator.read_switch(store)
    windows = [
        RateWindow(
            window=r.window,
            ended=r.ended,
            done=r.done,
            help_needed=r.help_needed,
            success_rate=round(r.done / r.ended, 4) if r.ended else None,
        )
        for r in await rates.get(store)
    ]
    return Status(
        workers=leases,
        busy=sum(1 for w in leases if w.alive),
        slots=slots,
        queue_depth=counts[TaskState.QUEUED.value],
        tasks_by_state=counts,
        rates=windows,
        model=(await llm_health()).to_dict(),
        emergency_stop={
            "paused": switch.paused,
            "by": switch.by,
            "since": switch.since,
            "tasks": list(switch.tasks),
        },
    )


def extension_list(found: list[Extension]) -> Extensions:
    """The probed MCP servers as ``GET /api/extensions`` answers them (URLs masked)."""
    return Extensions(
        extensions=[
            ExtensionInfo(
                name=e.name, transport=e.transport, target=masked_url(e.target),
                state=e.state.value, error=e.error,
                tools=[ExtensionToolInfo(name=t.name, description=t.description) for t in e.tools],
            )
            for e in found
        ]
    )  # fmt: skip
