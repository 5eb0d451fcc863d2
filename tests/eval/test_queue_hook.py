"""The worker's hook for queued evaluation tasks, on run folders the tests write: what a
worker does with a task it cannot run, or that the run's budgets leave unrun, and the
scoring claim that keeps two scorers of one task apart."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bot.config import Settings, load_settings
from bot.eval.agent_run import Approve
from bot.eval.queue_hook import EvalQueueHook
from bot.eval.queued import NOT_RUN, QueuedTask, claim_scoring, write_queued
from bot.eval.results import RunFolder, TaskResult
from bot.events import EvalRef, ForgeKind, IssueRef, RepoRef, TaskRequest
from bot.run_events import Outcome
from bot.storage.base import Task, TaskState
from bot.storage.sqlite import SqliteStore


def settings(tmp_path: Path) -> Settings:
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"storage": {"data_dir": str(tmp_path / "data")},
                                  "llm": {"model": "qwen-7b"}}))  # fmt: skip
    return load_settings({}, str(config))


def task(run: str, instance_id: str = "t-1", attempts: int = 1) -> Task:
    issue = IssueRef(RepoRef(ForgeKind.GITHUB, "octo/calc"), 7, title="t")
    request = TaskRequest(issue=issue, requested_by="eval", evaluation=EvalRef(run, instance_id))
    return Task("task-1", issue.key, issue.repo.key, request, TaskState.RUNNING,
                attempts=attempts)  # fmt: skip


def run_folder(tmp_path: Path, *, model: str = "qwen-7b", budgets: object = None) -> Path:
    run = tmp_path / "run"
    (run / "tasks" / "t-1").mkdir(parents=True)
    meta = {"model": model, "total": 2, "queue": True, "budgets": budgets or {}}
    (run / "run.json").write_text(json.dumps(meta))
    raw = {"instance_id": "t-1", "repo": "octo/calc"}
    write_queued(run / "tasks" / "t-1", QueuedTask(raw, 7, Approve.ALL))
    return run


async def hook_of(tmp_path: Path) -> EvalQueueHook:
    store = SqliteStore(tmp_path / "bot.sqlite3")  # not opened: these paths never use it
    config = settings(tmp_path)
    return EvalQueueHook(store, lambda: config)


async def test_a_worker_that_cannot_reach_the_run_gives_the_task_back_then_fails_it(
    tmp_path: Path,
) -> None:
    hook = await hook_of(tmp_path)
    outcome = await hook.take(task(str(tmp_path / "elsewhere")))
    assert isinstance(outcome, Outcome) and outcome.state is TaskState.QUEUED
    assert outcome.wake_at is not None and outcome.wake_at > time.time()
    assert "is the run folder shared with this worker?" in outcome.reason
    last = await hook.take(task(str(tmp_path / "elsewhere"), attempts=6))
    assert isinstance(last, Outcome) and last.state is TaskState.FAILED
    assert "gave up after 6 workers" in last.reason


@pytest.mark.parametrize("ref", [("relative/run", "t-1"), ("ABS", "../t-1"), ("ABS", ".x")])
async def test_a_reference_that_is_not_a_tasks_folder_is_never_followed(
    tmp_path: Path, ref: tuple[str, str]
) -> None:
    run = run_folder(tmp_path)
    hook = await hook_of(tmp_path)
    path, instance_id = ref
    outcome = await hook.take(task(str(run) if path == "ABS" else path, instance_id))
    assert isinstance(outcome, Outcome) and outcome.state is TaskState.QUEUED
    assert "not an evaluation task's reference" in outcome.reason


async def test_a_worker_of_another_model_gives_the_task_back(tmp_path: Path) -> None:
    run = run_folder(tmp_path, model="llama-70b")
    outcome = await (await hook_of(tmp_path)).take(task(str(run)))
    assert isinstance(outcome, Outcome) and outcome.state is TaskState.QUEUED
    assert outcome.reason == "this worker's model is qwen-7b, the run's llama-70b"


async def test_once_the_run_spent_its_budget_a_task_is_stopped_unrun_and_summed_up(
    tmp_path: Path,
) -> None:
    run = run_folder(tmp_path, budgets={"run_tokens": 1000})
    RunFolder(run, "qwen-7b").record(TaskResult("t-0", True, "", "done", prompt_tokens=1200))
    hook = await hook_of(tmp_path)
    outcome = await hook.take(task(str(run)))
    assert isinstance(outcome, Outcome) and outcome.state is TaskState.STOPPED
    assert outcome.reason == "not run: the run's tokens reached 1,000 (--max-run-tokens)"
    assert (run / "tasks" / "t-1" / NOT_RUN).is_file()
    await hook.ended(task(str(run)), outcome)  # the last of two: the run is summed up
    summary = json.loads((run / "summary.json").read_text())
    assert summary["not_run"] == ["t-1"] and summary["finished"] == 1
    assert "tokens reached 1,000" in (run / "report.md").read_text()


def test_one_scorer_at_a_time_and_a_dead_ones_claim_is_taken_over(tmp_path: Path) -> None:
    assert claim_scoring(tmp_path, 120)
    assert not claim_scoring(tmp_path, 120)  # a worker scores it now
    old = time.time() - 3 * 120 - 61
    os.utime(tmp_path / "scoring", (old, old))  # its holder died long ago
    assert claim_scoring(tmp_path, 120)
