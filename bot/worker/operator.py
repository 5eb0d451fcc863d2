"""What an operator can do to tasks without the issue: stop, pause, resume, retry one
task, and the emergency stop of all of them (pause-all / resume-all).

Each works on the store alone, so ``bot tasks ...`` and ``bot pause-all`` work with the
server running or not, on SQLite or PostgreSQL. A task's stop / pause / resume is the
same command message ``/agent stop`` leaves (with the operator as its author), so the
task's coordinator acts on it at its next safe point and says so in the issue, as for a
person's command. The emergency stop is a mark in the store: while it is set, worker
slots lease no task (queued ones wait; webhooks are still received and stored), and
every running task got a pause command; ``resume-all`` clears the mark and resumes the
tasks that pause-all paused (not those people paused).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from bot.events import CommandName, MessageKind, TaskMode, TaskRequest
from bot.storage.base import ACTIVE_STATES, Marks, Messages, Task, Tasks, TaskState
from bot.triggers import WAITING_STATES

SWITCH_KEY = "operator:pause-all"


class OperatorStore(Tasks, Messages, Marks, Protocol):
    """What the operator's actions use of the store: tasks, their messages, the switch."""


class OperatorError(Exception):
    """The operator's request cannot be carried out; the message says why."""


class UnknownTask(OperatorError):
    """No task has that id (or starts with it)."""


class TaskCommand(StrEnum):
    STOP = CommandName.STOP.value
    PAUSE = CommandName.PAUSE.value
    RESUME = CommandName.RESUME.value
    APPROVE = CommandName.APPROVE.value
    REJECT = CommandName.REJECT.value


@dataclass(frozen=True, slots=True)
class Switch:
    """The emergency stop: set or not, by whom, since when, and which tasks it paused."""

    paused: bool = False
    by: str = ""
    since: float = 0.0
    tasks: tuple[str, ...] = field(default=())

    def to_json(self) -> str:
        return json.dumps({"paused": self.paused, "by": self.by, "tasks": list(self.tasks)})

    @classmethod
    def from_mark(cls, mark: tuple[str, float] | None) -> Switch:
        if mark is None:
            return cls()
        owner, since = mark
        try:
            data = json.loads(owner)
            return cls(
                paused=bool(data["paused"]),
                by=str(data["by"]),
                since=since,
                tasks=tuple(str(t) for t in data.get("tasks", ())),
            )
        except (ValueError, TypeError, KeyError):
            # Unreadable: the safe reading of an emergency stop is "set".
            return cls(paused=True, by="(unreadable switch)", since=since)


async def read_switch(store: Marks) -> Switch:
    return Switch.from_mark(await store.get_mark(SWITCH_KEY))


async def find_task(store: Tasks, task_id: str) -> Task:
    """The task with this id, or the only one whose id starts with it."""
    task = await store.get_task(task_id)
    if task is not None:
        return task
    if len(task_id) >= 4:
        matches = [t for t in await store.list_tasks(limit=100_000) if t.id.startswith(task_id)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise OperatorError(f"{task_id!r} is the start of {len(matches)} task ids; give more")
    raise UnknownTask(f"no task {task_id!r}")


async def command(
    store: OperatorStore, task_id: str, name: TaskCommand, *, by: str, args: str = ""
) -> Task:
    """``/agent stop|pause|resume|approve|reject`` for one task, from the operator ``by``;
    ``args``: what follows the command (a rejection's reason)."""
    task = await find_task(store, task_id)
    if not task.active:
        raise OperatorError(f"task {task.id} has ended ({task.state.value}); nothing to {name}")
    payload: dict[str, object] = {"name": name.value, "args": args, "author": by}
    requeue = task.state in WAITING_STATES and name is not TaskCommand.PAUSE
    await store.add_message(task.id, MessageKind.COMMAND, payload, requeue=requeue)
    return task


async def answer(store: OperatorStore, task_id: str, text: str, *, by: str) -> Task:
    """A person's answer to what the task asked, as a comment in its issue gives it: the
    feedback the task reads at its next safe point (woken when it waits)."""
    task = await find_task(store, task_id)
    if not task.active:
        raise OperatorError(f"task {task.id} has ended ({task.state.value}); it reads no answer")
    if not text.strip():
        raise OperatorError("an empty answer tells the task nothing")
    payload: dict[str, object] = {"author": by, "body": text}
    await store.add_message(
        task.id, MessageKind.FEEDBACK, payload, requeue=task.state in WAITING_STATES
    )
    return task


async def retry(store: Tasks, task_id: str, *, by: str) -> Task:
    """A new task for an ended task's issue, as ``/agent retry`` starts one."""
    task = await find_task(store, task_id)
    active = await store.active_task_for(task.issue_key)
    if active is not None:
        raise OperatorError(f"issue {task.issue_key} has an active task: {active.id}")
    request = TaskRequest(
        issue=task.request.issue,
        requested_by=by,
        mode=TaskMode.RETRY,
        instructions=task.request.instructions,
        previous_task_id=task.id,
    )
    created, _ = await store.create_task(request)
    return created


async def pause_all(store: OperatorStore, *, by: str, paused_already: Iterable[str] = ()) -> Switch:
    """Set the emergency stop and ask every running task to pause at its next safe point;
    ``paused_already``: tasks the caller paused itself (resume-all resumes them too)."""
    current = await read_switch(store)
    running = await store.list_tasks(states=frozenset({TaskState.RUNNING}), limit=100_000)
    payload: dict[str, object] = {"name": CommandName.PAUSE.value, "args": "", "author": by}
    for task in running:
        await store.add_message(task.id, MessageKind.COMMAND, payload)
    ids = [*current.tasks, *paused_already, *(t.id for t in running)]
    paused = tuple(dict.fromkeys(ids))
    switch = Switch(paused=True, by=by, since=time.time(), tasks=paused)
    await store.put_mark(SWITCH_KEY, switch.to_json())
    return await read_switch(store)


async def resume_all(store: OperatorStore, *, by: str) -> list[str]:
    """Clear the emergency stop; resume the tasks it paused that are still paused (or
    still running, when the pause had not reached them yet). Returns their ids."""
    current = await read_switch(store)
    await store.put_mark(SWITCH_KEY, Switch(paused=False, by=by).to_json())
    payload: dict[str, object] = {"name": CommandName.RESUME.value, "args": "", "author": by}
    resumed = []
    for task_id in current.tasks:
        task = await store.get_task(task_id)
        if task is None or task.state not in ACTIVE_STATES:
            continue
        requeue = task.state is TaskState.PAUSED
        await store.add_message(task.id, MessageKind.COMMAND, payload, requeue=requeue)
        resumed.append(task.id)
    return resumed
