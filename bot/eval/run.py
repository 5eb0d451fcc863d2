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
from bot.eval.agent_run import AgentRun, Approve, Finish, local_forge, run_agent
from bot.eval.checkout import CheckoutError
from bot.eval.models import RunModels
from bot.eval.origin import bot_patch, make_origin, source_repo
from bot.eval.report import render, summarize
from bot.eval.results import RunFolder, Statement, TaskResult, read_results
from bot.eval.scoring import Score, score_patch
from bot.eval.tasks import EvalTask, load_tasks
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


async def run_eval(settings: Settings, options: RunOptions, progress: Progress) -> dict[str, Any]:
    """Run what is left of the run; returns its summary (also in summary.json)."""
    try:
        tasks, refused = await asyncio.to_thread(load_tasks, options.tasks)
    except OSError as exc:
        raise RunRefused(f"{options.tasks}: cannot read the tasks: {exc.strerror}") from None
    options = dataclasses.replace(options, folder=options.folder.absolute())
    models = RunModels(settings)
    folder = RunFolder(options.folder, models.name)
    finished = await asyncio.to_thread(_open_folder, folder, options, models.name, len(tasks))
    done_ids = {r.instance_id for r in finished}
    for refusal in refused:
        progress(f"refused: {refusal}")
        if not options.resume or not done_ids:
            await asyncio.to_thread(folder.refuse, json.dumps({"refused": str(refusal)}))
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
    await asyncio.to_thread(_write_summary, options.folder, summary, render(summary, results))
    return summary


def _open_folder(
    folder: RunFolder, options: RunOptions, model: str, total: int
) -> list[TaskResult]:
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
                "started": time.time()}  # fmt: skip
    if meta.get("total") != total:  # what `bot eval status` counts the queued tasks by
        meta["total"] = total
        meta_path.write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    folder.mend(finished)
    return finished


def _write_summary(path: Path, summary: dict[str, Any], report: str) -> None:
    (path / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (path / "report.md").write_text(report, encoding="utf-8")


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
    task_settings = _with_task_budgets(settings, options)

    async def one(task: EvalTask) -> None:
        async with slots:
            why = _over_budget(options, tally)
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


def _over_budget(options: RunOptions, tally: Tally) -> str:
    if options.run_cost is not None and tally.cost >= options.run_cost:
        return f"the run's cost reached ${options.run_cost:g} (--max-run-cost)"
    if options.run_tokens is not None and tally.tokens >= options.run_tokens:
        return f"the run's tokens reached {options.run_tokens:,} (--max-run-tokens)"
    return ""


def _with_task_budgets(settings: Settings, options: RunOptions) -> Settings:
    planning = settings.planning
    if options.task_cost is not None:
        budget = planning.budget.model_copy(update={"max_cost": options.task_cost})
        planning = planning.model_copy(update={"budget": budget})
    llm = settings.llm
    if options.task_tokens is not None:
        llm = llm.model_copy(update={"max_tokens_per_task": options.task_tokens})
    return settings.model_copy(update={"planning": planning, "llm": llm})


async def run_task(
    settings: Settings, task: EvalTask, run: Path, models: RunModels, approve: Approve
) -> TaskResult:
    """One task from scratch in ``run/tasks/ID`` (what an interrupted attempt left there is
    removed first); never raises for what the task holds: an error is its result."""
    started = time.monotonic()
    folder = run / "tasks" / task.instance_id
    await asyncio.to_thread(_fresh, folder)
    try:
        llm = await asyncio.to_thread(models.for_task, task.instance_id)
        source = await source_repo(task, run / "repos")
        base = await make_origin(source, task.base_commit, folder / "origin.git")
        forge = local_forge(origin=folder / "origin.git", folder=folder, repo=task.repo,
                            title=task.title, body=task.problem_statement,
                            settings=settings)  # fmt: skip
        agent = await run_agent(settings=settings, forge=forge, llm=llm, folder=folder,
                                approve=approve)  # fmt: skip
        branch, patch = await bot_patch(folder / "origin.git", base)
        score = await score_patch(
            repo=source, base_commit=base, model_patch=patch, test_patch=task.test_patch,
            fail_to_pass=task.fail_to_pass, pass_to_pass=task.pass_to_pass,
            test_command=task.test_command, setup=task.setup, settings=settings,
            work_dir=folder / "score",
        )  # fmt: skip
    except (CheckoutError, WorkspaceError, ConfigError) as exc:
        return _failed(task, str(exc), time.monotonic() - started)
    except Exception as exc:  # one task's failure never stops the run
        log.exception("task %s failed", task.instance_id)
        return _failed(task, f"{type(exc).__name__}: {exc}", time.monotonic() - started)
    return _result(task, agent, score, patch, branch, time.monotonic() - started)


def _fresh(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)


def _failed(task: EvalTask, why: str, took: float) -> TaskResult:
    return TaskResult(task.instance_id, False, why.splitlines()[0][:500] if why else "error",
                      Finish.ERROR.value, harness_seconds=took,
                      statement=statement_of(task))  # fmt: skip


def _result(
    task: EvalTask, agent: AgentRun, score: Score, patch: str, branch: str, took: float
) -> TaskResult:
    usage = agent.usage
    setup = agent.setup_seconds + score.setup_seconds
    harness = max(0.0, took - agent.setup_seconds - agent.agent_seconds - score.seconds)
    harness += max(0.0, score.seconds - score.setup_seconds - score.test_seconds)
    return TaskResult(
        instance_id=task.instance_id,
        resolved=score.resolved,
        reason=score.reason,
        outcome=agent.finish.value,
        agent_reason=agent.reason,
        model_patch=patch,
        branch=branch,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        tokens_by_phase=dict(usage.get("by_phase", {})),
        cost=float(usage.get("cost", 0.0)),
        model_calls=int(usage.get("calls", 0)),
        revisions=agent.revisions,
        waits_answered=agent.answered,
        setup_seconds=setup,
        agent_seconds=agent.agent_seconds,
        test_seconds=score.test_seconds,
        harness_seconds=harness,
        fail_to_pass={k: v.value for k, v in score.fail_to_pass.items()},
        pass_to_pass={k: v.value for k, v in score.pass_to_pass.items()},
        statement=statement_of(task),
    )


def statement_of(task: EvalTask) -> str:
    """Where the task's problem statement came from (``bot eval mine`` marks a commit's)."""
    return str(task.extra.get("statement", Statement.ISSUE.value))
