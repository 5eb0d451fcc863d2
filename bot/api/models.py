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
from bot.events import ForgeKind, TaskMode
from bot.record.history import HistoryError, describe_entry, history_path, read_entries
from bot.record.snapshot import checklist, status_snapshot
from bot.storage.base import Task, TaskState
from bot.worker.operator import Switch

MAX_PAGE = 200
MAX_TASK_ID = 100  # ids are UUIDs (36 characters); a prefix of one names it too
MAX_REASON_CHARS = 4000
MAX_INSTRUCTIONS_CHARS = 20_000
MAX_CONFIG_CHARS = 256 * 1024
TIMELINE_ENTRIES = 500

# --- parameters (path and query) ------------------------------------------------------------


class NoParameters(BaseModel):
    pass


class TaskId(BaseModel):
    task_id: Annotated[str, Field(min_length=1, max_length=MAX_TASK_ID)]


class TaskFile(BaseModel):
    task_id: str
    path: str


class NewTaskMode(StrEnum):
    """What a task started over the API does: the whole run, or a plan to approve."""

    RUN = TaskMode.RUN.value
    PLAN = TaskMode.PLAN_ONLY.value


class Action(StrEnum):
    """What ``POST /tasks/{task_id}/{action}`` does: an issue's command, or a retry
    (``reject`` has its own operation: it takes a reason)."""

    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"
    RETRY = "retry"
    APPROVE = "approve"


class TaskAction(BaseModel):
    task_id: str
    action: Action


class TaskReject(BaseModel):
    task_id: Annotated[str, Field(min_length=1, max_length=MAX_TASK_ID)]
    reason: Annotated[str, Field(max_length=MAX_REASON_CHARS)] = ""


class TaskAnswer(BaseModel):
    task_id: Annotated[str, Field(min_length=1, max_length=MAX_TASK_ID)]
    text: Annotated[str, Field(min_length=1, max_length=MAX_INSTRUCTIONS_CHARS)]


class NewTicket(BaseModel):
    """``POST /tickets``: an issue to open in ``repository`` on ``forge``, labelled to
    start a task."""

    forge: ForgeKind
    # ASCII spaces and controls spelled out: ``\s`` differs between the schema's regex dialect
    # (ECMA-262) and pydantic's (U+0085 is a space to one and not the other)
    repository: Annotated[
        str,
        Field(min_length=3, max_length=300, pattern=r"^[^/\x00-\x20\x7f]+(/[^/\x00-\x20\x7f]+)+$"),
    ]
    title: Annotated[str, Field(min_length=1, max_length=256)]
    body: Annotated[str, Field(max_length=MAX_INSTRUCTIONS_CHARS)] = ""


class TicketCreated(BaseModel):
    forge: ForgeKind
    repository: str
    number: int
    web_url: str
    label: str = Field(description="the label that starts a task on it")
    task_id: str = Field(description="the task started on it")


class NewTask(BaseModel):
    """``POST /tasks``: a task on the issue (or change request) at ``issue_url``."""

    issue_url: Annotated[str, Field(max_length=2000, pattern=r"^https?://\S+$")]
    instructions: Annotated[str, Field(max_length=MAX_INSTRUCTIONS_CHARS)] = ""
    mode: NewTaskMode = NewTaskMode.RUN


class ConfigText(BaseModel):
    """A candidate ``config.yaml``, as the body's text."""

    text: Annotated[str, Field(max_length=MAX_CONFIG_CHARS)]


class ConfigPut(ConfigText):
    if_match: Annotated[str, Field(max_length=200)]


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


class TaskCreated(BaseModel):
    task_id: str
    issue_url: str
    requested_by: str
    mode: str
    state: TaskState


class ActiveTask(Problem):
    task_id: str = Field(description="the issue's active task")


class ModelNotReady(Problem):
    setup_steps: list[str] = Field(description="what to do so the model answers")
    health: dict[str, Any] = Field(description="the model endpoint's report (GET /health/ai)")


class RunFile(BaseModel):
    path: str = Field(description="inside the run directory: GET .../artifacts/{path}")
    size: int


class RunFiles(BaseModel):
    task_id: str
    files: list[RunFile]


class ConfigProblem(BaseModel):
    key: str = Field(description="the setting, dotted (empty: the file as a whole)")
    message: str


class ConfigCheck(BaseModel):
    valid: bool
    problems: list[ConfigProblem]
    settings: dict[str, Any] | None = Field(description="the effective settings, secrets masked")
    restart_needed: list[str] = Field(
        description="sections that differ from the running ones and apply only after a restart"
    )
    refused_by_put: list[ConfigProblem] = Field(
        default_factory=list,
        description="keys it changes that only the file on the host may change: "
        "PUT /config refuses it (403) while any is listed",
    )


class ConfigRefused(Problem):
    problems: list[ConfigProblem]


class ConfigFile(BaseModel):
    path: str
    hash: str = Field(description="of the file's bytes: send it as If-Match with PUT /config")
    text: str | None = Field(description="the file's text (null: withheld, see withheld)")
    withheld: str | None = Field(description="why the text is withheld: it holds a secret")
    settings: dict[str, Any] = Field(description="the running settings, secrets masked")


class ConfigSaved(BaseModel):
    path: str
    hash: str
    previous: str = Field(description="where the file it replaced is kept")
    reload: list[str] = Field(description="what the reload did, one line per section")
    settings: dict[str, Any] = Field(description="the running settings now, secrets masked")


class ExtensionToolInfo(BaseModel):
    name: str = Field(description="as the agent sees it: <server>_<tool>")
    description: str


class ExtensionInfo(BaseModel):
    name: str
    transport: str = Field(description="stdio | http")
    target: str = Field(description="the command, or the URL (its query left out)")
    state: str = Field(description="ready | unavailable")
    error: str = Field(description="why it is unavailable (empty: it is ready)")
    tools: list[ExtensionToolInfo]


class Extensions(BaseModel):
    extensions: list[ExtensionInfo] = Field(description="each configured MCP server")


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
        return timeline_from(history_path(data_dir, task_id))
    except ValueError:
        return []


def timeline_from(path: Path) -> list[TimelineEntry]:
    """A planning history file's last entries, described (none when it cannot be read):
    a task's, or a task of an eval run (its ``trajectory.jsonl``)."""
    try:
        if not path.exists():
            return []
        entries = list(read_entries(path))
    except HistoryError:
        return []
    return timeline_of(entries)


def timeline_of(entries: list[dict[str, Any]]) -> list[TimelineEntry]:
    """The last ``TIMELINE_ENTRIES`` entries of a planning history, described."""
    return [
        TimelineEntry(
            timestamp=str(e.get("timestamp", "")), type=str(e["type"]), text=describe_entry(e)
        )
        for e in entries[-TIMELINE_ENTRIES:]
    ]


def switch_state(switch: Switch) -> SwitchState:
    return SwitchState(
        paused=switch.paused, by=switch.by, since=switch.since, tasks=list(switch.tasks)
    )
