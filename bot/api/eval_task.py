"""One task of a run of ``bot eval run``, read only, for
``GET /api/eval/runs/{run_id}/tasks/{instance_id}`` and the dashboard's page of it: its
result, how each FAIL_TO_PASS and PASS_TO_PASS test ended, the end of the scoring's test
log (``tasks/ID/score/tests.log``), and its trajectory (``trajectory.jsonl``, the planning
history) as a task's page shows a task: the plan checklist (``record/snapshot.py``'s
``history_snapshot`` and ``checklist``) and the timeline.

Ids are confined to the runs folder as ``eval_runs.py`` confines them (``NotInRuns``); a
file that is a symbolic link is not read. The functions do blocking file I/O: callers run
them in a thread.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field

from bot.api.eval_runs import EvalTaskRow, NotInRuns, inside, task_result, task_row
from bot.api.models import PlanItem, TimelineEntry, timeline_of
from bot.api.operations import Operation, Refusal
from bot.config import CurrentSettings
from bot.record.history import HistoryError, read_entries
from bot.record.snapshot import checklist, history_snapshot

LOG_BYTES = 16 * 1024  # the end of the test log a task's answer carries
TRAJECTORY = "trajectory.jsonl"
TEST_LOG = ("score", "tests.log")


class TestGroup(StrEnum):
    """Which of the task's lists a test is in (its value is SWE-bench's name): the tests
    the fix must make pass, and those it must keep passing."""

    __test__ = False  # not a test class for pytest

    TO_FIX = "FAIL_TO_PASS"
    TO_KEEP = "PASS_TO_PASS"


class EvalTaskId(BaseModel):
    run_id: Annotated[str, Field(min_length=1, max_length=200)]
    instance_id: Annotated[str, Field(min_length=1, max_length=200)]


class EvalTest(BaseModel):
    id: str = Field(description="the test's id, as the task names it")
    group: TestGroup
    status: str = Field(
        description="passed, failed, error (it did not run to its end) or missing (the "
        "tests' output does not name it: the tests did not run, or a patch did not apply)"
    )


class EvalTestLog(BaseModel):
    path: str = Field(description="in the run folder: tasks/ID/score/tests.log")
    size: int = Field(description="bytes")
    excerpt: str = Field(description=f"its last {LOG_BYTES} bytes at most, from a line's start")
    cut: bool = Field(description="the excerpt leaves the log's beginning out")


class EvalTask(BaseModel):
    run_id: str
    instance_id: str
    result: EvalTaskRow | None = Field(description="null while the task has not finished")
    tests: list[EvalTest] = Field(description="FAIL_TO_PASS's, then PASS_TO_PASS's, in order")
    test_log: EvalTestLog | None = Field(description="null when the tests did not run")
    plan: list[PlanItem] = Field(description="the last plan's subtasks, with their status")
    timeline: list[TimelineEntry] = Field(description="the planning history's last entries")


def tests_of(data: dict[str, Any]) -> list[EvalTest]:
    """Each test of a result line with its status (a list that is not a map is none)."""
    found = []
    for group, key in ((TestGroup.TO_FIX, "fail_to_pass"),
                       (TestGroup.TO_KEEP, "pass_to_pass")):  # fmt: skip
        statuses = data.get(key)
        if isinstance(statuses, dict):
            found += [EvalTest(id=str(k), group=group, status=str(v)) for k, v in statuses.items()]
    return found


def score_log(root: Path, run_id: str, instance_id: str) -> EvalTestLog | None:
    """The end of the task's test log (None when there is none, or it is a link)."""
    try:
        path = inside(root, run_id, "tasks", instance_id, *TEST_LOG)
        if path.is_symlink() or not path.is_file():
            return None
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - LOG_BYTES))
            tail = handle.read(LOG_BYTES)
    except (NotInRuns, OSError):
        return None
    cut = size > LOG_BYTES
    if cut and b"\n" in tail:
        tail = tail[tail.index(b"\n") + 1 :]
    return EvalTestLog(path="/".join(("tasks", instance_id, *TEST_LOG)), size=size,
                       excerpt=tail.decode("utf-8", errors="replace"), cut=cut)  # fmt: skip


def history(folder: Path) -> list[dict[str, Any]]:
    """The task's planning history (none when it is a link or cannot be read)."""
    path = folder / TRAJECTORY
    try:
        if path.is_symlink() or not path.is_file():
            return []
        return list(read_entries(path))
    except HistoryError:
        return []


def show_task(root: Path, run_id: str, instance_id: str) -> EvalTask:
    """A task of a run: what the API answers and the dashboard shows."""
    data, folder = task_result(root, run_id, instance_id)
    entries = history(folder)
    return EvalTask(
        run_id=run_id,
        instance_id=instance_id,
        result=task_row(data) if data is not None else None,
        tests=tests_of(data) if data is not None else [],
        test_log=score_log(root, run_id, instance_id),
        plan=[PlanItem(**item) for item in checklist(history_snapshot(entries))],
        timeline=timeline_of(entries),
    )


NO_TASK = {404: "no such run in the runs folder (eval.runs_dir), or no such task in it"}


class EvalTasks:
    """``GET /api/eval/runs/{run_id}/tasks/{instance_id}`` over the runs folder of the
    settings now."""

    def __init__(self, settings: CurrentSettings) -> None:
        self.settings = settings

    async def show_eval_task(self, params: EvalTaskId) -> EvalTask:
        """One task of a run: its result, each FAIL_TO_PASS and PASS_TO_PASS test's status,
        the end of the tests' log, and its trajectory's plan checklist and timeline."""
        root = self.settings().eval_runs_dir
        try:
            return await asyncio.to_thread(show_task, root, params.run_id, params.instance_id)
        except NotInRuns as exc:
            raise Refusal(404, str(exc)) from None

    def operations(self) -> list[Operation[Any]]:
        return [
            Operation(
                "GET", "/eval/runs/{run_id}/tasks/{instance_id}", self.show_eval_task,
                EvalTaskId, EvalTask, refusals=NO_TASK,
            ),
        ]  # fmt: skip
