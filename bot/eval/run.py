"""``bot eval run``: every task through the agent and the scoring, into a run folder.

Tasks run side by side (``workers``), each within its own budgets (``max_cost`` and
``max_tokens`` per task become ``planning.budget.max_cost`` and
``llm.max_tokens_per_task`` for it); the run's own budgets stop it cleanly: no task starts
once what the finished ones spent reaches them, and those left are listed as not run (a
later ``--resume`` runs them). A finished task is written at once (``results.py``), so an
interrupted run loses none, and ``--resume`` never runs one again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.config import ConfigError, Settings
from bot.eval.agent_run import Approve, local_forge, run_agent
from bot.eval.budgets import Budgets
from bot.eval.checkout import CheckoutError
from bot.eval.models import RunModels
from bot.eval.origin import make_origin, source_repo
from bot.eval.report import render, summarize
from bot.eval.results import RunFolder, TaskResult, read_results
from bot.eval.run_meta import replace_file
from bot.eval.task_result import failed, result_of, scored
from bot.eval.tasks import EvalTask, Refused, load_tasks
from bot.sandbox.gitcmd import WorkspaceError

log = logging.getLogger("bot.eval")


class RunRefused(Exception):
    """The run cannot start (the folder, the tasks file); the message says why."""


@dataclass(frozen=True)
class RunOptions:
    tasks: Path
    folder: Path
    workers: int = 1
    resume: bool = False
    approve: Approve = Approve.ALL
    task_cost: float | None = None
    task_tokens: int | None = None
    run_cost: float | None = None
    run_tokens: int | None = None

    @property
    def budgets(self) -> Budgets:
        return Budgets(self.task_cost, self.task_tokens, self.run_cost, self.run_tokens)


@dataclass
class Tally:
    """What the run has done so far (the progress line)."""

    total: int
    done: int = 0
    resolved: int = 0
    tokens: int = 0
    cost: float = 0.0
    running: set[str] = field(default_factory=set)
    not_run: list[str] = field(default_factory=list)
    stopped: str = ""

    def add(self, result: TaskResult) -> None:
        self.done += 1
        self.resolved += int(result.resolved)
        self.tokens += result.tokens
        self.cost += result.cost

    def line(self) -> str:
        return (f"[{self.done}/{self.total}] resolved {self.resolved}  tokens {self.tokens:,}  "
                f"cost ${self.cost:.4f}  running {len(self.running)}")  # fmt: skip


Progress = Callable[[str], None]


async def read_tasks(options: RunOptions) -> tuple[list[EvalTask], list[Refused], RunOptions]:
    """The run's tasks and those refused, and the options with the folder made absolute;
    raises ``RunRefused`` when the tasks cannot be read."""
    try:
        tasks, refused = await asyncio.to_thread(load_tasks, options.tasks)
    except OSError as exc:
        raise RunRefused(f"{options.tasks}: cannot read the tasks: {exc.strerror}") from None
    return tasks, refused, dataclasses.replace(options, folder=options.folder.absolute())


async def say_refused(folder: RunFolder, refused: list[Refused], progress: Progress) -> None:
    """Each refused task on the progress lines and in ``refused.jsonl``."""
    for refusal in refused:
        progress(f"refused: {refusal}")
    await asyncio.to_thread(folder.refuse, [json.dumps({"refused": str(r)}) for r in refused])


async def run_eval(settings: Settings, options: RunOptions, progress: Progress) -> dict[str, Any]:
    """Run what is left of the run; returns its summary (also in summary.json)."""
    tasks, refused, options = await read_tasks(options)
    models = RunModels(settings)
    folder = RunFolder(options.folder, models.name)
    finished = await asyncio.to_thread(open_folder, folder, options, models.name, len(tasks))
    done_ids = {r.instance_id for r in finished}
    await say_refused(folder, refused, progress)
    pending = [t for t in tasks if t.instance_id not in done_ids]
    tally = Tally(total=len(tasks))
    for result in finished:
        tally.add(result)
    try:
        await _run_all(settings, options, folder, models, pending, tally, progress)
    finally:
        await models.aclose()
    results = await asyncio.to_thread(read_results, options.folder)
    wanted = {t.instance_id for t in tasks}
    results = [r for r in results if r.instance_id in wanted]
    summary = summarize(results, model=models.name, tasks=len(tasks), refused=len(refused),
                        not_run=tally.not_run, stopped=tally.stopped)  # fmt: skip
    await asyncio.to_thread(write_summary, options.folder, summary, render(summary, results))
    return summary


def open_folder(
    folder: RunFolder, options: RunOptions, model: str, total: int, **kept: Any
) -> list[TaskResult]:
    """The run folder made or read back (``run.json``: what is run, with ``kept`` beside
    it); the tasks it finished already. Raises ``RunRefused``."""
    path = folder.path
    finished = read_results(path)
    if finished and not options.resume:
        raise RunRefused(f"{path} holds a run already: --resume to finish it, or another folder")
    path.mkdir(parents=True, exist_ok=True)
    meta_path = path / "run.json"
    meta: dict[str, Any] = {}
    if meta_path.is_file():
        try:
            meta = dict(json.loads(meta_path.read_text(encoding="utf-8")))
        except (ValueError, TypeError):
            raise RunRefused(f"{meta_path} is not a run's description (JSON object)") from None
    else:
        meta = {"tasks": str(options.tasks), "model": model, "approve": options.approve.value,
                "started": time.time(), **kept}  # fmt: skip
    if meta.get("total") != total or any(meta.get(k) != v for k, v in kept.items()):
        meta.update(total=total, **kept)  # what `bot eval status` counts the queued by
        replace_file(meta_path, json.dumps(meta, indent=2) + "\n")
    folder.mend(finished)
    return finished


def write_summary(path: Path, summary: dict[str, Any], report: str) -> None:
    replace_file(path / "summary.json", json.dumps(summary, indent=2) + "\n")
    replace_file(path / "report.md", report)


async def _run_all(
    settings: Settings,
    options: RunOptions,
    folder: RunFolder,
    models: RunModels,
    pending: list[EvalTask],
    tally: Tally,
    progress: Progress,
) -> None:
    slots = asyncio.Semaphore(max(1, options.workers))
    task_settings = options.budgets.for_task(settings)

    async def one(task: EvalTask) -> None:
        async with slots:
            why = options.budgets.run_spent(tally.cost, tally.tokens)
            if why:
                tally.stopped = why
                tally.not_run.append(task.instance_id)
                return
            tally.running.add(task.instance_id)
            try:
                result = await run_task(task_settings, task, folder.path, models, options.approve)
            finally:
                tally.running.discard(task.instance_id)
            await asyncio.to_thread(folder.record, result)
            tally.add(result)
            progress(f"{tally.line()}  {task.instance_id}: "
                     f"{'resolved' if result.resolved else 'unresolved'}")  # fmt: skip

    await asyncio.gather(*(one(task) for task in pending))


async def run_task(
    settings: Settings, task: EvalTask, run: Path, models: RunModels, approve: Approve
) -> TaskResult:
    """One task from scratch in ``run/tasks/ID`` (what an interrupted attempt left there is
    removed first); never raises for what the task holds: an error is its result."""
    started = time.monotonic()
    folder = run / "tasks" / task.instance_id
    await asyncio.to_thread(fresh, folder)
    try:
        llm = await asyncio.to_thread(models.for_task, task.instance_id)
        source = await source_repo(task, run / "repos")
        base = await make_origin(source, task.base_commit, folder / "origin.git")
        forge = local_forge(origin=folder / "origin.git", folder=folder, repo=task.repo,
                            title=task.title, body=task.problem_statement,
                            settings=settings)  # fmt: skip
        agent = await run_agent(settings=settings, forge=forge, llm=llm, folder=folder,
                                approve=approve)  # fmt: skip
        branch, patch, score = await scored(settings, task, source, base, folder)
    except (CheckoutError, WorkspaceError, ConfigError) as exc:
        return failed(task, str(exc), time.monotonic() - started)
    except Exception as exc:  # one task's failure never stops the run
        log.exception("task %s failed", task.instance_id)
        return failed(task, f"{type(exc).__name__}: {exc}", time.monotonic() - started)
    return result_of(task, agent, score, patch, branch, time.monotonic() - started)


def fresh(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
