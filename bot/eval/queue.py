"""``bot eval run --queue``: a run's tasks on the bot's own queue (PostgreSQL), for the
workers of every machine (``bot serve``), and ``bot eval status`` of such a run.

Each task's folder is made here, as ``bot eval run`` makes it (the task's bare remote at
``base_commit``), with ``queued.json`` (``queued.py``); then the task goes on the store's
queue. The run folder must be at the same path on every machine whose workers take the
tasks (a shared file system); a worker that cannot reach it gives the task back to the
queue, saying why (``queue_hook.py``). ``--resume`` queues what was never queued, leaves
alone what is still on the queue, answers a wait a dead worker left, and scores what ended
without its result recorded (its worker died while scoring).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bot.config import Settings
from bot.eval.agent_run import WAITS, answer_wait
from bot.eval.checkout import CheckoutError
from bot.eval.models import model_name
from bot.eval.origin import make_origin, source_repo
from bot.eval.queued import (
    NOT_RUN,
    STORE_TASK,
    QueuedTask,
    add_run_time,
    finish,
    issue_number,
    queued_raw,
    read_queued,
    record,
    request_of,
    summarize_if_done,
    write_queued,
)
from bot.eval.results import RunFolder, read_results
from bot.eval.run import Progress, RunOptions, fresh, open_folder, read_tasks, say_refused
from bot.eval.task_result import failed
from bot.eval.tasks import EvalTask
from bot.events import TaskRequest
from bot.run_events import Outcome
from bot.sandbox.gitcmd import WorkspaceError
from bot.storage.base import Store, Task, TaskState
from bot.storage.factory import open_store

LEFT = 60.0  # seconds a task may wait before a resume answers for its worker


@dataclass
class Queued:
    """What ``--queue`` did: tasks put on the queue, left there, scored here, failed."""

    queued: int = 0
    on_queue: int = 0
    scored: int = 0
    failed: int = 0
    refused: int = 0


async def queue_eval(settings: Settings, options: RunOptions, progress: Progress) -> Queued:
    tasks, refused, options = await read_tasks(options)
    model = model_name(settings)
    folder = RunFolder(options.folder, model)
    store = open_store(settings)
    await store.open()  # first: a queue that cannot be reached leaves no folder behind
    try:
        finished = await asyncio.to_thread(
            open_folder, folder, options, model, len(tasks), queue=True,
            budgets=options.budgets.to_dict(),
        )  # fmt: skip
        done = {r.instance_id for r in finished}
        await say_refused(folder, refused, progress)
        tally = Queued(refused=len(refused))
        for task in tasks:
            if task.instance_id not in done:
                await _one(settings, store, options, task, tally, progress)
        # the last worker may have died between its result and the summary
        await asyncio.to_thread(summarize_if_done, options.folder, model)
    finally:
        await store.close()
    return tally


async def _one(
    settings: Settings,
    store: Store,
    options: RunOptions,
    task: EvalTask,
    tally: Queued,
    progress: Progress,
) -> None:
    run = options.folder
    folder = run / "tasks" / task.instance_id
    number = issue_number(run, task.instance_id)
    stored = await _stored(store, folder, request_of(run, task, number))
    if stored is not None and stored.state in WAITS and time.time() - stored.updated_at > LEFT:
        # its worker stored the wait and died before answering it
        queued = await asyncio.to_thread(add_run_time, folder, 0.0, answered=1)
        await answer_wait(store, stored.id, queued.approve)
        progress(f"{task.instance_id}: a wait its worker left unanswered, answered")
    if stored is not None and stored.active:
        tally.on_queue += 1
        progress(f"{task.instance_id}: on the queue already ({stored.state.value})")
        return
    if stored is not None:  # ended, its result never recorded: scored here
        queued = await asyncio.to_thread(read_queued, folder)
        checkpoint = await store.load_checkpoint(stored.id) or {}
        outcome = Outcome(stored.state, reason=stored.error or "")
        result = await finish(settings, run, folder, queued, outcome, checkpoint,
                              model_name(settings))  # fmt: skip
        if result is None:
            tally.on_queue += 1
            progress(f"{task.instance_id}: being scored by its worker")
            return
        tally.scored += 1
        progress(f"{task.instance_id}: ended on a worker; scored here: "
                 f"{'resolved' if result.resolved else 'unresolved'}")  # fmt: skip
        return
    await asyncio.to_thread(fresh, folder)
    try:
        source = await source_repo(task, run / "repos")
        base = await make_origin(source, task.base_commit, folder / "origin.git")
    except (CheckoutError, WorkspaceError) as exc:
        await asyncio.to_thread(record, run, model_name(settings), failed(task, str(exc), 0.0))
        tally.failed += 1
        progress(f"{task.instance_id}: {exc}")
        return
    queued = QueuedTask(queued_raw(task, source, base), number, options.approve)
    await asyncio.to_thread(write_queued, folder, queued)
    created, _ = await store.create_task(request_of(run, task, number))
    await asyncio.to_thread((folder / STORE_TASK).write_text, created.id + "\n")
    tally.queued += 1
    progress(f"{task.instance_id}: queued as task {created.id}")


async def _stored(store: Store, folder: Path, request: TaskRequest) -> Task | None:
    """The store's task of a task folder that was queued before (None when never, or
    when it was not run for the run's budgets: it is queued afresh)."""
    path = folder / STORE_TASK
    if (folder / NOT_RUN).is_file():
        return None
    if not path.is_file():  # queued, and the command stopped before it wrote the id
        active = await store.active_task_for(request.issue.key)
        if active is not None:
            await asyncio.to_thread(path.write_text, active.id + "\n")
        return active
    task_id = (await asyncio.to_thread(path.read_text)).strip()
    return await store.get_task(task_id)


async def queue_states(settings: Settings, run: Path) -> Counter[TaskState]:
    """The store's state of each task of a queued run that has no result yet."""
    ids = await asyncio.to_thread(_unrecorded, run)
    found: Counter[TaskState] = Counter()
    store = open_store(settings)
    await store.open()
    try:
        for task_id in ids:
            task = await store.get_task(task_id)
            if task is not None:
                found[task.state] += 1
    finally:
        await store.close()
    return found


def _unrecorded(run: Path) -> list[str]:
    """The store's ids of the run's queued tasks with no result and not left unrun."""
    done = {r.instance_id for r in read_results(run)}
    return [path.read_text().strip() for path in sorted((run / "tasks").glob(f"*/{STORE_TASK}"))
            if path.parent.name not in done and not (path.parent / NOT_RUN).is_file()]  # fmt: skip
