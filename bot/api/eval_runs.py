"""``bot eval run``'s run folders, read only, for ``GET /api/eval/runs`` and the dashboard.

The runs folder (``eval.runs_dir``) holds one folder per run (``run.json``, ``results.jsonl``,
``summary.json``, ``report.md``, ``tasks/ID/``: ``docs/eval.md``). A run or task id names one
entry of its folder and nothing else: an id that is not a plain name (``..``, a slash), a
symbolic link anywhere on the way, or a path that resolves outside the runs folder is
refused (``NotInRuns``). Lines a crash cut are skipped as ``bot eval`` skips them.
The functions do blocking file I/O: callers run them in a thread.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field

from bot.api.models import NoParameters
from bot.api.operations import Operation, Refusal
from bot.config import CurrentSettings

MAX_RUNS = 500
MAX_RESULT_BYTES = 32 * 1024 * 1024
NAME = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$"
_NAME = re.compile(NAME)


class NotInRuns(Exception):
    """The id names nothing inside the runs folder; the message says why."""


# --- what the API takes and gives ------------------------------------------------------------


class EvalRunId(BaseModel):
    run_id: Annotated[str, Field(min_length=1, max_length=200)]


class EvalRunSummary(BaseModel):
    id: str = Field(description="the run folder's name")
    model: str
    started: str = Field(description="ISO 8601, UTC ('' when unknown)")
    tasks: int = Field(description="tasks the run was given (finished ones before summary.json)")
    finished: int
    resolved: int
    resolved_rate: float
    tokens: int
    cost: float = Field(description="US dollars")


class EvalRunList(BaseModel):
    runs: list[EvalRunSummary]


class EvalTaskRow(BaseModel):
    instance_id: str
    resolved: bool
    outcome: str = Field(description="how the agent's run ended: done, help needed, error")
    reason: str = Field(description="why it is not resolved ('' when resolved)")
    agent_reason: str
    tokens: int
    tokens_by_phase: dict[str, dict[str, int]]
    cost: float
    model_calls: int
    revisions: int
    seconds: float = Field(description="set-up, agent, tests and the harness's own time")
    setup_seconds: float = Field(description="the workspace's set-up and the scoring's")
    agent_seconds: float
    test_seconds: float
    harness_seconds: float = Field(description="the harness's own: origin, diff, bookkeeping")


class EvalRun(EvalRunSummary):
    interval_95: list[float] = Field(description="the resolved rate's 95% Wilson interval")
    outcomes: dict[str, int]
    model_calls: int
    not_run: list[str] = Field(description="tasks a run budget kept from starting")
    stopped: str = Field(description="why the run stopped early ('' when it did not)")
    results: list[EvalTaskRow]


# --- the folders ------------------------------------------------------------------------------


def inside(root: Path, *names: str) -> Path:
    """``root/names...`` when each name is a plain entry name and nothing on the way is a
    symbolic link or leaves ``root``; raises ``NotInRuns`` otherwise (it need not exist)."""
    real_root = root.resolve()
    path = real_root
    for name in names:
        if not _NAME.match(name) or name in (".", ".."):
            raise NotInRuns(f"{name!r} is not a name of the runs folder")
        path = path / name
        if path.is_symlink():
            raise NotInRuns(f"{name!r} is a symbolic link")
    if not path.resolve().is_relative_to(real_root):
        raise NotInRuns(f"{'/'.join(names)!r} leaves the runs folder")
    return path


def _run_folder(root: Path, run_id: str) -> Path:
    folder = inside(root, run_id)
    if not (folder / "run.json").is_file() or (folder / "run.json").is_symlink():
        raise NotInRuns(f"{run_id!r} is not a run folder")
    return folder


def _json(path: Path) -> dict[str, Any]:
    try:
        if path.is_symlink():
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _results(folder: Path) -> list[dict[str, Any]]:
    """The finished tasks' lines, the first of an id kept (as ``bot eval`` reads them)."""
    path = folder / "results.jsonl"
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_RESULT_BYTES:
            return []
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found: dict[str, dict[str, Any]] = {}
    for line in lines:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("instance_id"), str):
            found.setdefault(data["instance_id"], data)
    return list(found.values())


def _numbers(value: object) -> list[float]:
    items = value if isinstance(value, list) else []
    return [float(x) for x in items if isinstance(x, int | float) and not isinstance(x, bool)]


def _number(data: dict[str, Any], key: str) -> float:
    value = data.get(key, 0)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def task_row(data: dict[str, Any]) -> EvalTaskRow:
    phases = data.get("tokens_by_phase")
    seconds = ("setup_seconds", "agent_seconds", "test_seconds", "harness_seconds")
    return EvalTaskRow(
        instance_id=str(data["instance_id"]),
        resolved=data.get("resolved") is True,
        outcome=str(data.get("outcome", "")),
        reason=str(data.get("reason", "")),
        agent_reason=str(data.get("agent_reason", "")),
        tokens=int(_number(data, "prompt_tokens") + _number(data, "completion_tokens")),
        tokens_by_phase=_phases(phases) if isinstance(phases, dict) else {},
        cost=_number(data, "cost"),
        model_calls=int(_number(data, "model_calls")),
        revisions=int(_number(data, "revisions")),
        seconds=sum(_number(data, key) for key in seconds),
        setup_seconds=_number(data, "setup_seconds"),
        agent_seconds=_number(data, "agent_seconds"),
        test_seconds=_number(data, "test_seconds"),
        harness_seconds=_number(data, "harness_seconds"),
    )


def _phases(phases: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {
        str(name): {str(k): int(_number(counts, k)) for k in counts}
        for name, counts in phases.items()
        if isinstance(counts, dict)
    }


def _summary(run_id: str, folder: Path, rows: list[EvalTaskRow]) -> dict[str, Any]:
    meta, summary = _json(folder / "run.json"), _json(folder / "summary.json")
    started = _number(meta, "started")
    resolved = sum(1 for r in rows if r.resolved)
    return {
        "id": run_id,
        "model": str(summary.get("model") or meta.get("model") or ""),
        "started": _iso(started) if started else "",
        "tasks": max(int(_number(summary, "tasks")), len(rows)),
        "finished": len(rows),
        "resolved": resolved,
        "resolved_rate": resolved / len(rows) if rows else 0.0,
        "tokens": sum(r.tokens for r in rows),
        "cost": sum(r.cost for r in rows),
    }


def _iso(moment: float) -> str:
    when = datetime.datetime.fromtimestamp(moment, tz=datetime.UTC)
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


def list_runs(root: Path) -> EvalRunList:
    """The run folders of ``root``, newest first (none when it does not exist)."""
    try:
        entries = sorted(root.iterdir()) if root.is_dir() else []
    except OSError:
        entries = []
    runs = []
    for entry in entries:
        try:
            folder = _run_folder(root, entry.name)
        except NotInRuns:
            continue
        rows = [task_row(r) for r in _results(folder)]
        runs.append(EvalRunSummary(**_summary(entry.name, folder, rows)))
    runs.sort(key=lambda r: (r.started, r.id), reverse=True)
    return EvalRunList(runs=runs[:MAX_RUNS])


def show_run(root: Path, run_id: str) -> EvalRun:
    """One run: its figures and every finished task's row."""
    folder = _run_folder(root, run_id)
    rows = [task_row(r) for r in _results(folder)]
    summary = _json(folder / "summary.json")
    interval = summary.get("interval_95")
    outcomes = summary.get("outcomes")
    not_run = summary.get("not_run")
    return EvalRun(
        **_summary(run_id, folder, rows),
        interval_95=_numbers(interval),
        outcomes=_phases({"": outcomes}).get("", {}),
        model_calls=sum(r.model_calls for r in rows),
        not_run=[str(x) for x in not_run] if isinstance(not_run, list) else [],
        stopped=str(summary.get("stopped", "")),
        results=rows,
    )


def task_folder(root: Path, run_id: str, instance_id: str) -> Path:
    """A task's folder in a run (``tasks/ID``); ``NotInRuns`` when there is none."""
    _run_folder(root, run_id)
    folder = inside(root, run_id, "tasks", instance_id)
    if not folder.is_dir():
        raise NotInRuns(f"run {run_id!r} has no task {instance_id!r}")
    return folder


def task_result(root: Path, run_id: str, instance_id: str) -> tuple[dict[str, Any] | None, Path]:
    """A task's line of ``results.jsonl`` (None while not finished) and its folder, whose
    ``trajectory.jsonl`` (the planning history), ``report.md`` and ``score/tests.log``
    show its run (``eval_task.py``)."""
    folder = task_folder(root, run_id, instance_id)
    found = [r for r in _results(root.resolve() / run_id) if r["instance_id"] == instance_id]
    return (found[0] if found else None), folder


# --- the operations ---------------------------------------------------------------------------

NO_RUN = {404: "no such run in the runs folder (eval.runs_dir)"}


class EvalRuns:
    """``GET /api/eval/runs`` and ``GET /api/eval/runs/{run_id}`` over the runs folder of
    the settings now."""

    def __init__(self, settings: CurrentSettings) -> None:
        self.settings = settings

    @property
    def root(self) -> Path:
        return self.settings().eval_runs_dir

    async def list_eval_runs(self, params: NoParameters) -> EvalRunList:
        """The runs of ``bot eval run`` in the runs folder (eval.runs_dir), newest first:
        model, tasks, resolved, tokens, cost."""
        return await asyncio.to_thread(list_runs, self.root)

    async def show_eval_run(self, params: EvalRunId) -> EvalRun:
        """One run: its figures and each finished task's result (resolved, outcome,
        tokens, cost, time, reason)."""
        try:
            return await asyncio.to_thread(show_run, self.root, params.run_id)
        except NotInRuns as exc:
            raise Refusal(404, str(exc)) from None

    def operations(self) -> list[Operation[Any]]:
        return [
            Operation("GET", "/eval/runs", self.list_eval_runs, NoParameters, EvalRunList),
            Operation(
                "GET", "/eval/runs/{run_id}", self.show_eval_run, EvalRunId, EvalRun,
                refusals=NO_RUN,
            ),
        ]  # fmt: skip
