"""The worker's hook for queued evaluation tasks (``bot serve`` hands it to its worker).

A worker of any machine that leases such a task runs it as it runs every task, with the
parts the task's folder gives (``take``): the task's ``LocalForge`` built from the folder,
its per-task script when the worker's model is a folder of scripts, the run's per-task
budgets; or, once the run's own budgets are spent, no run at all. After each outcome
(``ended``): the run's time is added to the task's; a wait is answered as nobody would
be on a benchmark (at most ``MAX_ROUNDS`` times, then the task is stopped), and a task
that has ended is scored and recorded in the run folder. A worker that dies while
scoring leaves the task ended and unrecorded: ``bot eval run --queue --resume`` scores it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from enum import Enum
from pathlib import Path

from bot.config import ConfigError, CurrentSettings, Settings
from bot.eval.agent_run import (
    MAX_ROUNDS,
    WAITS,
    AnswerStore,
    answer_wait,
    keep_trajectory,
    move_history,
)
from bot.eval.local_forge import LocalForge
from bot.eval.models import model_name, script_folder, task_script
from bot.eval.queued import (
    NOT_RUN,
    QUEUED,
    QueuedTask,
    add_run_time,
    finish,
    local_forge_of,
    mark_not_run,
    read_queued,
    spent_stop,
    summarize_if_done,
)
from bot.eval.run_meta import read_meta
from bot.eval.tasks import valid_instance_id
from bot.llm.scripted import ScriptedLLM
from bot.run_events import Outcome
from bot.storage.base import ACTIVE_STATES, Task, TaskState
from bot.worker.hooks import HookedRun
from bot.worker.outcomes import given_back

log = logging.getLogger("bot.eval")

GAVE_UP = "the task kept waiting for people; nobody answers on a benchmark"


class EvalQueueHook:
    """``TaskHook`` for the tasks of ``bot eval run --queue``."""

    def __init__(self, store: AnswerStore, settings: CurrentSettings) -> None:
        self.store = store
        self._settings = settings
        self._started: dict[str, float] = {}
        self._scripts: dict[str, ScriptedLLM] = {}  # the runs' scripted models, by task

    def claims(self, task: Task) -> bool:
        return task.request.evaluation is not None

    async def take(self, task: Task) -> HookedRun | Outcome:
        settings = self._settings()
        try:
            run, folder = _paths(task)
            meta = await asyncio.to_thread(read_meta, run)
            queued = await asyncio.to_thread(read_queued, folder)
        except (OSError, ValueError, KeyError) as exc:  # this machine does not see the run
            why = f"evaluation task: {exc} (is the run folder shared with this worker?)"
            return given_back(why, attempts=task.attempts, now=time.time())
        if meta.model != model_name(settings):  # one run measures one model
            why = f"this worker's model is {model_name(settings)}, the run's {meta.model}"
            return given_back(why, attempts=task.attempts, now=time.time())
        try:
            stop = await asyncio.to_thread(spent_stop, run)
            if stop:
                await asyncio.to_thread(mark_not_run, folder, stop)
                return Outcome(TaskState.STOPPED, reason=f"not run: {stop}")
            forge = await asyncio.to_thread(local_forge_of, folder, queued, settings)
            llm = await asyncio.to_thread(_model, settings, queued)
        except (OSError, ValueError, KeyError, ConfigError) as exc:  # the task's own files
            return Outcome(TaskState.FAILED, reason=f"evaluation task {folder}: {exc}")
        self._started[task.id] = time.monotonic()
        if llm is not None:
            self._scripts[task.id] = llm
        return HookedRun(forge=forge, llm=llm, settings=meta.budgets.for_task)

    async def forge(self, task: Task) -> LocalForge | None:
        try:
            _, folder = _paths(task)
            queued = await asyncio.to_thread(read_queued, folder)
            return await asyncio.to_thread(local_forge_of, folder, queued, self._settings())
        except (OSError, ValueError, KeyError):
            return None

    async def ended(self, task: Task, outcome: Outcome) -> None:
        took = time.monotonic() - self._started.pop(task.id, time.monotonic())
        script = self._scripts.pop(task.id, None)
        used = len(script.requests) if script is not None else 0
        settings = self._settings()
        try:
            run, folder = _paths(task)
        except ValueError:
            return
        there = await asyncio.to_thread(_state_of, run, folder)
        if there is _There.UNREACHABLE:  # given back or failed, saying so
            return
        if there is _There.NOT_RUN:
            await asyncio.to_thread(summarize_if_done, run, model_name(settings))
            return
        if outcome.state in WAITS:
            queued = await asyncio.to_thread(read_queued, folder)
            if queued.answered < MAX_ROUNDS:  # the folder first: the next run reads it
                await asyncio.to_thread(move_history, settings.data_dir, task.id, folder)
                await asyncio.to_thread(add_run_time, folder, took, answered=1, script_used=used)
                await answer_wait(self.store, task.id, queued.approve)
                return
            stopped = await self.store.set_state(
                task.id, TaskState.STOPPED, error=GAVE_UP, expect_state=outcome.state
            )
            if not stopped:  # someone moved it meanwhile (a person, an operator)
                return
            outcome = Outcome(outcome.state, reason=GAVE_UP)
        elif outcome.state in ACTIVE_STATES:  # a retry later: not ended
            await asyncio.to_thread(add_run_time, folder, took, script_used=used)
            await asyncio.to_thread(move_history, settings.data_dir, task.id, folder)
            return
        # ended: its workspace and history in this worker's data directory are kept no longer
        await asyncio.to_thread(keep_trajectory, settings.data_dir, task.id, folder)
        queued = await asyncio.to_thread(add_run_time, folder, took, script_used=used)
        checkpoint = await self.store.load_checkpoint(task.id) or {}
        result = await finish(settings, run, folder, queued, outcome, checkpoint,
                              model_name(settings))  # fmt: skip
        if result is not None:
            log.info("evaluation task %s: %s", queued.instance_id,
                     "resolved" if result.resolved else f"unresolved: {result.reason}")  # fmt: skip


class _There(Enum):
    """What a worker finds of a task's folder after its run."""

    UNREACHABLE = "unreachable"
    NOT_RUN = "not run"
    FOLDER = "folder"


def _state_of(run: Path, folder: Path) -> _There:
    if not (folder / QUEUED).is_file():
        return _There.UNREACHABLE
    return _There.NOT_RUN if (folder / NOT_RUN).is_file() else _There.FOLDER


def _paths(task: Task) -> tuple[Path, Path]:
    """The run folder and the task's folder a queued task names; ``ValueError`` for a
    reference that is not one (a relative path, an id that is no task's)."""
    ref = task.request.evaluation
    if ref is None or not Path(ref.run).is_absolute() or not valid_instance_id(ref.instance_id):
        raise ValueError(f"not an evaluation task's reference: {ref}")
    run = Path(ref.run)
    return run, run / "tasks" / ref.instance_id


def _model(settings: Settings, queued: QueuedTask) -> ScriptedLLM | None:
    """The task's own script, from the answer its runs so far have not used, when the
    worker's model is a folder of scripts; else None (the worker's model)."""
    folder = script_folder(settings)
    if folder is None:
        return None
    return task_script(folder, queued.instance_id, skip=queued.script_used)
