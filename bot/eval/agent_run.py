"""One task run by the bot's own worker, as ``bot run ISSUE_URL`` runs one (``oneshot``):
the same store, worker, prompts, planning, tools, sandbox, set-up, gate and evidence check,
with the task's ``LocalForge`` in place of GitHub.

A task that waits for people is answered as nobody would be on a benchmark: questions get
"no answer: decide"; an approval is given or refused by ``--approve``. The run then goes on,
at most ``MAX_ROUNDS`` times.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from bot.config import Settings
from bot.eval.local_forge import LocalForge
from bot.events import ForgeKind, MessageKind, TaskRequest, TaskState
from bot.llm.base import LLM
from bot.oneshot import run_once
from bot.record.state import AgentState
from bot.run_events import Outcome, WaitKind
from bot.runtime import Runtime
from bot.storage.base import Checkpoints
from bot.storage.sqlite import SqliteStore
from bot.worker import Worker
from bot.worker.operator import OperatorStore, TaskCommand, command

NO_ANSWER = "no answer: decide"
REQUESTER = "eval"
MAX_ROUNDS = 6


class Approve(StrEnum):
    ALL = "all"
    NONE = "none"


class Finish(StrEnum):
    """How the agent's run ended."""

    DONE = "done"
    HELP_NEEDED = "help needed"
    ERROR = "error"


_FINISH = {TaskState.DONE: Finish.DONE, TaskState.NEEDS_HUMAN: Finish.HELP_NEEDED}


@dataclass
class AgentRun:
    finish: Finish
    reason: str
    state: str
    usage: dict[str, Any] = field(default_factory=dict)
    revisions: int = 0
    setup_seconds: float = 0.0
    agent_seconds: float = 0.0
    answered: int = 0  # waits answered for nobody (questions, approvals)


async def run_agent(
    *,
    settings: Settings,
    forge: LocalForge,
    llm: LLM,
    folder: Path,
    approve: Approve,
) -> AgentRun:
    """Run the issue of ``forge`` to its end; the store and the trajectory are kept in
    ``folder`` (``bot.sqlite3``, ``trajectory.jsonl``, ``report.md``)."""
    store = SqliteStore(folder / "bot.sqlite3")
    await store.open()
    started = time.monotonic()
    try:
        runtime = Runtime(settings, store=store, forges={forge.kind: forge}, llm=llm)
        request = TaskRequest(issue=forge.issue.ref, requested_by=REQUESTER)
        outcome = await run_once(runtime, request)
        [task] = await store.list_tasks(limit=2)
        answered = 0
        while outcome.state in WAITS and answered < MAX_ROUNDS:
            await answer_wait(store, task.id, approve)
            answered += 1
            outcome = await _again(runtime, task.id)
        checkpoint = await store.load_checkpoint(task.id) or {}
        took = time.monotonic() - started
        await asyncio.to_thread(keep_trajectory, settings.data_dir, task.id, folder)
    finally:
        await store.close()
    return summed(outcome, checkpoint, took, answered)


WAITS = frozenset({TaskState.AWAITING_INPUT, TaskState.AWAITING_APPROVAL})


class AnswerStore(Checkpoints, OperatorStore, Protocol):
    """What answering a wait uses of the store."""


async def answer_wait(store: AnswerStore, task_id: str, approve: Approve) -> None:
    """What nobody answers on a benchmark: "no answer: decide" to a question, the
    approval given or refused by ``--approve``; the task is queued again."""
    checkpoint = await store.load_checkpoint(task_id) or {}
    waiting = AgentState.from_dict(checkpoint).waiting if checkpoint else None
    if waiting is None or waiting.kind is WaitKind.ANSWERS:
        payload = {"author": REQUESTER, "body": NO_ANSWER}
        await store.add_message(task_id, MessageKind.FEEDBACK, payload, requeue=True)
        return
    name = TaskCommand.APPROVE if approve is Approve.ALL else TaskCommand.REJECT
    await command(
        store, task_id, name, by=REQUESTER, args="" if approve is Approve.ALL else NO_ANSWER
    )


async def _again(runtime: Runtime, task_id: str) -> Outcome:
    worker = Worker(runtime, owner="eval")
    leased = await runtime.store.lease_task(worker.owner, runtime.settings.worker.lease_seconds)
    if leased is None or leased.id != task_id:
        task = await runtime.store.get_task(task_id)
        state = task.state if task is not None else TaskState.FAILED
        return Outcome(state, reason="the task could not be taken up again")
    return await worker.run_task(leased)


def summed(outcome: Outcome, checkpoint: dict[str, Any], took: float, answered: int) -> AgentRun:
    setup = checkpoint.get("setup") if isinstance(checkpoint.get("setup"), dict) else {}
    setup_seconds = float((setup or {}).get("duration", 0.0) or 0.0)
    finish = _FINISH.get(outcome.state, Finish.ERROR)
    return AgentRun(
        finish=finish,
        reason=outcome.reason,
        state=outcome.state.value,
        usage=dict(checkpoint.get("usage") or {}),
        revisions=int(checkpoint.get("revisions") or 0),
        setup_seconds=setup_seconds,
        agent_seconds=max(0.0, took - setup_seconds),
        answered=answered,
    )


def move_history(data_dir: Path, task_id: str, folder: Path) -> None:
    """The planning history written so far, moved to the end of the folder's
    ``trajectory.jsonl`` (the agent never reads it back)."""
    history = data_dir / "planning_history" / f"{task_id}.jsonl"
    if history.is_file():
        with history.open("rb") as source, (folder / "trajectory.jsonl").open("ab") as kept:
            shutil.copyfileobj(source, kept)
        history.unlink()


def keep_trajectory(data_dir: Path, task_id: str, folder: Path) -> None:
    """The task's planning history, added to its folder's ``trajectory.jsonl`` (a queued
    task's runs on several workers each add theirs), and its run report copied there; its
    workspace and run directory in the data directory are removed."""
    move_history(data_dir, task_id, folder)
    run_dir = data_dir / "runs" / task_id
    if (run_dir / "report.md").is_file():
        shutil.copyfile(run_dir / "report.md", folder / "report.md")
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.rmtree(data_dir / "workspaces" / task_id, ignore_errors=True)


def local_forge(
    *, origin: Path, folder: Path, repo: str, title: str, body: str, settings: Settings
) -> LocalForge:
    return LocalForge(origin=origin, folder=folder, repo=repo, title=title, body=body,
                      requester=REQUESTER, bot_login=settings.bot.github_login,
                      kind=ForgeKind.GITHUB)  # fmt: skip
