"""A task of a queued run (``bot eval run --queue``) as its folder keeps it, and its end.

``RUN/tasks/ID/queued.json`` holds what a worker on any machine needs: the task as
SWE-bench gives it (its ``repo_path`` the local source, its ``base_commit`` the full
id), the issue number it is queued under, the approvals flag, and the time its runs took
so far and the waits answered (the worker that runs it writes these); ``store_task``
the store's id of the task (the command that queued it wrote it). The worker builds the
task's ``LocalForge`` from the folder (``forge.json``), and when the task ends scores the
bot's branch and records the result; the last task recorded writes the run's summary and
report.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
import zlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.eval.agent_run import REQUESTER, Approve, summed
from bot.eval.local_forge import BASE_BRANCH, LocalForge
from bot.eval.report import render, summarize
from bot.eval.results import REFUSED, RunFolder, TaskResult, read_results
from bot.eval.run import write_summary
from bot.eval.run_meta import read_meta, replace_file
from bot.eval.task_result import failed, result_of, scored
from bot.eval.tasks import EvalTask, parse_task
from bot.events import EvalRef, ForgeKind, IssueRef, RepoRef, TaskRequest
from bot.run_events import Outcome

QUEUED = "queued.json"
STORE_TASK = "store_task"
SCORING = "scoring"  # the claim of whoever scores the task now
NOT_RUN = "not_run.json"


@dataclass(frozen=True)
class QueuedTask:
    raw: dict[str, Any]  # the task in SWE-bench's form (repo_path: the local source)
    number: int  # the issue number it is queued under (one key per task and run)
    approve: Approve
    agent_seconds: float = 0.0
    answered: int = 0
    script_used: int = 0  # a scripted model's answers the runs so far used

    @property
    def instance_id(self) -> str:
        return str(self.raw["instance_id"])

    def task(self, folder: Path) -> EvalTask:
        return parse_task(self.raw, base=folder)

    def to_json(self) -> str:
        data = {**asdict(self), "approve": self.approve.value}
        return json.dumps(data, ensure_ascii=False, indent=1) + "\n"


def queued_raw(task: EvalTask, source: Path, base: str) -> dict[str, Any]:
    """The task as a worker reads it back: its source and commit resolved."""
    raw: dict[str, Any] = {
        **task.extra, "instance_id": task.instance_id, "repo": task.repo,
        "base_commit": base, "problem_statement": task.problem_statement,
        "test_patch": task.test_patch, "FAIL_TO_PASS": list(task.fail_to_pass),
        "PASS_TO_PASS": list(task.pass_to_pass), "hints_text": task.hints_text,
        "patch": task.patch, "repo_path": str(source.absolute()),
    }  # fmt: skip
    if task.test_command is not None:
        raw["test_command"] = list(task.test_command)
    if task.setup is not None:
        raw["setup"] = list(task.setup)
    return raw


def issue_number(run: Path, instance_id: str) -> int:
    """The issue number a task is queued under: one per run folder and task, so that two
    runs of the same tasks on one queue are different issues (the store keeps one active
    task per issue), and the same on every resume."""
    return zlib.crc32(f"{run.absolute()}\0{instance_id}".encode()) % 2_000_000_000 + 1


def request_of(run: Path, task: EvalTask, number: int) -> TaskRequest:
    """The store's task for an evaluation task: its issue as the local forge shows it."""
    repo = RepoRef(ForgeKind.GITHUB, task.repo, default_branch=BASE_BRANCH)
    issue = IssueRef(repo, number, title=task.title, body=task.problem_statement,
                     author=REQUESTER)  # fmt: skip
    ref = EvalRef(str(run.absolute()), task.instance_id)
    return TaskRequest(issue=issue, requested_by=REQUESTER, evaluation=ref)


def read_queued(folder: Path) -> QueuedTask:
    """Raises ``ValueError`` (or ``OSError``) for a folder that holds no queued task."""
    data = json.loads((folder / QUEUED).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("raw"), dict):
        raise ValueError(f"{folder / QUEUED} is not a queued task")
    return QueuedTask(
        raw=data["raw"], number=int(data["number"]), approve=Approve(data["approve"]),
        agent_seconds=float(data.get("agent_seconds", 0)), answered=int(data.get("answered", 0)),
        script_used=int(data.get("script_used", 0)),
    )  # fmt: skip


def write_queued(folder: Path, queued: QueuedTask) -> None:
    replace_file(folder / QUEUED, queued.to_json())


def add_run_time(
    folder: Path, seconds: float, *, answered: int = 0, script_used: int = 0
) -> QueuedTask:
    """A run's time, the waits answered after it and the script's answers it used, added
    to the task's; written."""
    queued = read_queued(folder)
    queued = replace(queued, agent_seconds=queued.agent_seconds + seconds,
                     answered=queued.answered + answered,
                     script_used=queued.script_used + script_used)  # fmt: skip
    write_queued(folder, queued)
    return queued


def local_forge_of(folder: Path, queued: QueuedTask, settings: Settings) -> LocalForge:
    """The task's forge as the folder left it (file reads: call it in a thread)."""
    task = queued.task(folder)
    return LocalForge(origin=folder / "origin.git", folder=folder, repo=task.repo,
                      title=task.title, body=task.problem_statement, requester=REQUESTER,
                      bot_login=settings.bot.github_login, kind=ForgeKind.GITHUB,
                      number=queued.number)  # fmt: skip


def spent_stop(run: Path) -> str:
    """Why no further task of the run may start ("" while its budgets allow)."""
    budgets = read_meta(run).budgets
    results = read_results(run)
    return budgets.run_spent(sum(r.cost for r in results), sum(r.tokens for r in results))


async def finish(
    settings: Settings,
    run: Path,
    folder: Path,
    queued: QueuedTask,
    outcome: Outcome,
    checkpoint: dict[str, Any],
    model: str,
) -> TaskResult | None:
    """The ended task scored and recorded, once, by whoever claims its scoring (its
    worker, or a resume after that worker died); the run's summary when it was the last.
    None: another is scoring it now."""
    if not await asyncio.to_thread(claim_scoring, folder, settings.sandbox.timeout):
        return None
    try:
        result = await _scored(settings, folder, queued, outcome, checkpoint)
        await asyncio.to_thread(record, run, model, result)
    finally:
        await asyncio.to_thread((folder / SCORING).unlink, missing_ok=True)
    return result


async def _scored(
    settings: Settings,
    folder: Path,
    queued: QueuedTask,
    outcome: Outcome,
    checkpoint: dict[str, Any],
) -> TaskResult:
    task = queued.task(folder)
    source = Path(str(queued.raw["repo_path"]))
    base = str(queued.raw["base_commit"])
    agent = summed(outcome, checkpoint, queued.agent_seconds, queued.answered)
    try:
        branch, patch, score = await scored(settings, task, source, base, folder)
    except Exception as exc:  # what the task holds ends it, never the worker
        result = failed(task, f"{type(exc).__name__}: {exc}", agent.agent_seconds)
    else:
        result = result_of(task, agent, score, patch, branch, agent.agent_seconds + score.seconds)
    return result


def claim_scoring(folder: Path, test_timeout: float) -> bool:
    """The task's scoring taken by this process (``scoring``, made exclusively); False
    while another holds it. A claim older than a scoring may take (its tests' timeout,
    three times, and a minute) is one whose holder died: it is taken over."""
    path = folder / SCORING
    for _ in range(2):
        try:
            handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                age = time.time() - path.stat().st_mtime
            except FileNotFoundError:
                continue
            if age < 3 * test_timeout + 60:
                return False
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(handle, "w") as claim:
            claim.write(f"{socket.gethostname()}:{os.getpid()}\n")
        return True
    return False


def record(run: Path, model: str, result: TaskResult) -> None:
    """The result in the run folder, and the summary when it was the last (file writes:
    call it in a thread)."""
    RunFolder(run, model).record(result)
    summarize_if_done(run, model)


def summarize_if_done(run: Path, model: str) -> bool:
    """``summary.json`` and ``report.md`` once every task is recorded or not run."""
    folder = RunFolder(run, model)
    total = read_meta(run).total
    with folder.locked():
        results = read_results(run)
        not_run = sorted(p.parent.name for p in (run / "tasks").glob(f"*/{NOT_RUN}"))
        if total is None or len(results) + len(not_run) < total:
            return False
        summary = summarize(results, model=model, tasks=total, refused=_refused(run),
                            not_run=not_run, stopped=_stopped(run, not_run))  # fmt: skip
        write_summary(run, summary, render(summary, results))
        return True


def mark_not_run(folder: Path, reason: str) -> None:
    replace_file(folder / NOT_RUN, json.dumps({"reason": reason}) + "\n")


def _refused(run: Path) -> int:
    path = run / REFUSED
    return len(path.read_text(encoding="utf-8").splitlines()) if path.is_file() else 0


def _stopped(run: Path, not_run: list[str]) -> str:
    for name in not_run:
        data = json.loads((run / "tasks" / name / NOT_RUN).read_text(encoding="utf-8"))
        return str(data.get("reason", ""))
    return ""
