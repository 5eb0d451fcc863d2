"""What the REST API under ``/api`` takes and gives: typed parameters and answers.

Pydantic models, so a request's parameters are validated (422 with the reasons) and the
OpenAPI description (``openapi.py``) is built from the same types. ``summary`` and
``detail`` turn a stored task (and its checkpoint and history) into the answers; the
dashboard shows the same.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field

from bot.config import ObservabilitySettings
from bot.events import ForgeKind
from bot.record.history import HistoryError, describe_entry, history_path, read_entries
from bot.record.snapshot import checklist, status_snapshot
from bot.storage.base import Task, TaskState
from bot.worker.operator import Switch

MAX_PAGE = 200
MAX_TASK_ID = 100  # ids are UUIDs (36 characters); a prefix of one names it too
TIMELINE_ENTRIES = 500

# --- parameters (path and query) ------------------------------------------------------------


class NoParameters(BaseModel):
    pass


class TaskId(BaseModel):
    task_id: Annotated[str, Field(min_length=1, max_length=MAX_TASK_ID)]


class TaskFile(BaseModel):
    task_id: str
    path: str


class Action(StrEnum):
    """What ``POST /tasks/{task_id}/{action}`` does: an issue's command, or a retry."""

    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"
    RETRY = "retry"
    APPROVE = "approve"
    REJECT = "reject"


class TaskAction(BaseModel):
    task_id: str
    action: Action


class TaskFilter(BaseModel):
    state: TaskState | None = None
    forge: ForgeKind | None = None
    repository: Annotated[str | None, Field(max_length=300)] = None
    offset: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 50


class SettingsQuery(BaseModel):
    repo: Annotated[str | None, Field(max_length=300)] = None
    user: Annotated[str | None, Field(max_length=100)] = None
    forge: ForgeKind | None = None


# --- answers --------------------------------------------------------------------------------


class TaskSummary(BaseModel):
    id: str
    forge: ForgeKind
    repository: str
    issue: int
    issue_url: str
    state: TaskState
    phase: str
    requested_by: str
    mode: str
    created_at: float
    updated_at: float
    error: str | None = None


class TaskPage(BaseModel):
    tasks: list[TaskSummary]
    total: int = Field(description="tasks that match the filters")
    offset: int
    limit: int


class PlanItem(BaseModel):
    id: str
    description: str
    status: str = Field(description="pending, running, done or failed")


class TimelineEntry(BaseModel):
    timestamp: str
    type: str
    text: str


class TaskDetail(TaskSummary):
    stage: str = Field(description="the agent's phase in its last checkpoint")
    plan: list[PlanItem]
    revisions: int
    tokens: int
    cached_tokens: int = Field(description="of tokens, read from the provider's prompt cache")
    cost: float = Field(description="US dollars at llm.prices (0: the model has no price)")
    links: dict[str, str] = Field(description="branch, change request, report")
    timeline: list[TimelineEntry]
    trace_id: str | None = Field(
        None, description="the OpenTelemetry trace of the task's last traced run (null: none)"
    )
    trace_url: str | None = Field(None, description="that trace at observability.trace_url")


class ActionResult(BaseModel):
    task_id: str
    action: str
    by: str
    detail: str


class Problem(BaseModel):
    detail: str


class ValidationProblem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class InvalidParameters(BaseModel):
    detail: list[ValidationProblem]


class EffectiveSettings(BaseModel):
    repo: str | None
    user: str | None
    forge: ForgeKind
    overrides_applied: list[dict[str, Any]] = Field(
        description="planning keys changed: key, value, previous, source"
    )
    refused: list[dict[str, Any]] = Field(
        description="planning keys refused: key, value, reason, limit, message"
    )
    repo_config_error: str | None = Field(
        description="why the repository's .agent.yaml would stop a task (null: valid or none)"
    )
    settings: dict[str, Any] = Field(description="every setting, secrets masked")


class SwitchState(BaseModel):
    paused: bool
    by: str
    since: float
    tasks: list[str]


# --- from the store -------------------------------------------------------------------------


def summary(task: Task) -> TaskSummary:
    issue = task.request.issue
    return TaskSummary(
        id=task.id,
        forge=issue.repo.forge,
        repository=issue.repo.full_name,
        issue=issue.number,
        issue_url=issue.web_url,
        state=task.state,
        phase=task.phase,
        requested_by=task.request.requested_by,
        mode=task.request.mode.value,
        created_at=task.created_at,
        updated_at=task.updated_at,
        error=task.error,
    )


def detail(
    task: Task,
    checkpoint: dict[str, Any] | None,
    data_dir: Path,
    observability: ObservabilitySettings | None = None,
) -> TaskDetail:
    snapshot = status_snapshot(checkpoint) or {}
    trace_id = str(snapshot.get("trace_id") or "") or None
    plan = [PlanItem(**item) for item in checklist(snapshot)]
    return TaskDetail(
        **summary(task).model_dump(),
        stage=str(snapshot.get("phase", "")),
        plan=plan,
        revisions=int(snapshot.get("revisions", 0)),
        tokens=int(snapshot.get("total_tokens", 0)),
        cached_tokens=int(snapshot.get("cached_tokens", 0)),
        cost=float(snapshot.get("cost", 0.0)),
        links=dict(snapshot.get("links", {})),
        timeline=timeline(data_dir, task.id),
        trace_id=trace_id,
        trace_url=observability.trace_link(trace_id or "") if observability else None,
    )


def timeline(data_dir: Path, task_id: str) -> list[TimelineEntry]:
    try:
        path = history_path(data_dir, task_id)
        if not path.exists():
            return []
        entries = list(read_entries(path))[-TIMELINE_ENTRIES:]
    except (ValueError, HistoryError):
        return []
    return [
        TimelineEntry(
            timestamp=str(e.get("timestamp", "")), type=str(e["type"]), text=describe_entry(e)
        )
        for e in entries
    ]


def switch_state(switch: Switch) -> SwitchState:
    return SwitchState(
        paused=switch.paused, by=switch.by, since=switch.since, tasks=list(switch.tasks)
    )
