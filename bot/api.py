"""The REST API under ``/api``: tasks, their reports and artifacts, operator actions.

Served only when ``server.api_token`` (``BOT_API_TOKEN``) is set; every request must
carry it as a bearer token (compared in constant time); a client that sent too many wrong
ones lately gets 429 (``bot.throttle``). Without the token configured
``create_app`` does not mount this at all, so ``/api`` answers 404. OpenAPI describes it
at ``/api/openapi.json`` (FastAPI builds the description from the types below).
Actions are the operator's (``bot.worker.operator``), recorded with the token's name
(``server.api_token_name``) as their author, and reach the task as the issue's commands
do.
"""

from __future__ import annotations

import hmac
import mimetypes
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, PlainTextResponse
from pydantic import BaseModel, Field

from bot.config import ObservabilitySettings, Settings, masked
from bot.events import ForgeKind
from bot.forges.base import AccessDenied, ForgeError, NotFound
from bot.paths import PathRefused, resolve_inside
from bot.record.history import HistoryError, describe_entry, history_path, read_entries
from bot.record.snapshot import checklist, status_snapshot
from bot.runtime import Runtime
from bot.storage.base import Task, TaskState
from bot.throttle import FailureThrottle
from bot.worker import operator, task_settings

MAX_PAGE = 200
TIMELINE_ENTRIES = 500


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


REFUSED: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "no or wrong token"},
    429: {
        "model": Problem,
        "description": "too many wrong tokens from this client lately (see Retry-After)",
    },
}
UNKNOWN: dict[int | str, dict[str, Any]] = {404: {"model": Problem, "description": "no such task"}}
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"model": Problem, "description": "the task cannot do that now"}
}


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


Action = Literal["stop", "pause", "resume", "retry", "approve", "reject"]


def create_api(runtime: Runtime, token: str, *, throttle: FailureThrottle) -> FastAPI:
    """The ``/api`` application; ``token`` is the bearer token it requires, and
    ``throttle`` counts each client's wrong tokens (429 once it has sent too many)."""
    api = FastAPI(
        title="Coding agent bot API",
        version="1",
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
        responses=REFUSED,
    )
    expected = f"Bearer {token}".encode()

    async def authorised(request: Request) -> None:
        # On the event loop (a plain def would run in a thread pool): the throttle is
        # not thread-safe.
        client = request.client.host if request.client is not None else None
        wait = throttle.retry_after(client)
        if wait is not None:
            raise HTTPException(
                429, "too many wrong tokens from this address; try again later",
                {"Retry-After": str(wait)},
            )  # fmt: skip
        given = request.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            throttle.failed(client)
            raise HTTPException(
                401, "a valid bearer token is required", {"WWW-Authenticate": "Bearer"}
            )

    guard = [Depends(authorised)]

    def settings() -> Settings:
        return runtime.settings

    def author() -> str:
        return f"{settings().server.api_token_name} (API)"

    async def task_of(task_id: str) -> Task:
        try:
            return await operator.find_task(runtime.store, task_id)
        except operator.OperatorError as exc:
            raise HTTPException(404, str(exc)) from None

    @api.get("/tasks", dependencies=guard, response_model=TaskPage)
    async def list_tasks(
        state: TaskState | None = None,
        forge: ForgeKind | None = None,
        repository: Annotated[str | None, Query(max_length=300)] = None,
        offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    ) -> TaskPage:
        """Tasks, newest first, filtered by state, forge and repository."""
        states = frozenset({state}) if state is not None else None
        found = await runtime.store.list_tasks(states=states, limit=offset + limit + 10_000)
        matching = [
            t
            for t in found
            if (forge is None or t.request.issue.repo.forge is forge)
            and (repository is None or t.request.issue.repo.full_name == repository)
        ]
        page = matching[offset : offset + limit]
        return TaskPage(
            tasks=[summary(t) for t in page], total=len(matching), offset=offset, limit=limit
        )

    @api.get("/tasks/{task_id}", dependencies=guard, response_model=TaskDetail, responses=UNKNOWN)
    async def show_task(task_id: str) -> TaskDetail:
        """A task: state, stage, plan with each item's status, timeline, tokens, links."""
        task = await task_of(task_id)
        checkpoint = await runtime.store.load_checkpoint(task.id)
        return detail(task, checkpoint, settings().data_dir, settings().observability)

    @api.get(
        "/tasks/{task_id}/report",
        dependencies=guard,
        response_model=None,
        responses={200: {"content": {"text/markdown": {"schema": {"type": "string"}}}}, **UNKNOWN},
    )
    async def task_report(task_id: str) -> PlainTextResponse:
        """The task's run report (report.md)."""
        task = await task_of(task_id)
        report = settings().data_dir / "runs" / task.id / "report.md"
        if not report.is_file():
            raise HTTPException(404, "this task has no run report yet")
        return PlainTextResponse(report.read_text(encoding="utf-8"), media_type="text/markdown")

    @api.get(
        "/tasks/{task_id}/artifacts/{path:path}",
        dependencies=guard,
        response_model=None,
        responses={200: {"content": {"*/*": {"schema": {"type": "string"}}}}, **UNKNOWN},
    )
    async def task_artifact(task_id: str, path: str) -> FileResponse:
        """A file of the task's run directory (never anything outside it)."""
        task = await task_of(task_id)
        run_dir = settings().data_dir / "runs" / task.id
        try:
            found = resolve_inside(run_dir, path) if run_dir.is_dir() else None
        except PathRefused as exc:
            raise HTTPException(404, f"not in the run directory: {exc}") from None
        if found is None or not found.is_file() or found.is_symlink():
            raise HTTPException(404, "no such file in the run directory")
        kind = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
        return FileResponse(found, media_type=kind)

    @api.post(
        "/tasks/{task_id}/{action}",
        dependencies=guard,
        response_model=ActionResult,
        responses={**UNKNOWN, **CONFLICT},
    )
    async def act(task_id: str, action: Action) -> ActionResult:
        """The same effect as the issue's command, with the API token's name as author."""
        by = author()
        try:
            if action == "retry":
                created = await operator.retry(runtime.store, task_id, by=by)
                return ActionResult(
                    task_id=created.id, action=action, by=by, detail="a new task is queued"
                )
            task = await operator.command(
                runtime.store, task_id, operator.TaskCommand(action), by=by
            )
        except operator.OperatorError as exc:
            status = 404 if isinstance(exc, operator.UnknownTask) else 409
            raise HTTPException(status, str(exc)) from None
        return ActionResult(
            task_id=task.id,
            action=action,
            by=by,
            detail="sent; the task acts on it at its next safe point",
        )

    @api.post("/pause-all", dependencies=guard, response_model=SwitchState)
    async def pause_all() -> SwitchState:
        """Emergency stop: running tasks pause at their next safe point, queued ones wait."""
        return switch_state(await operator.pause_all(runtime.store, by=author()))

    @api.post("/resume-all", dependencies=guard, response_model=SwitchState)
    async def resume_all() -> SwitchState:
        """End the emergency stop and resume the tasks it paused."""
        await operator.resume_all(runtime.store, by=author())
        return switch_state(await operator.read_switch(runtime.store))

    @api.get("/pause-all", dependencies=guard, response_model=SwitchState)
    async def switch() -> SwitchState:
        """Whether the emergency stop is set."""
        return switch_state(await operator.read_switch(runtime.store))

    @api.get(
        "/settings/effective",
        dependencies=guard,
        response_model=EffectiveSettings,
        responses={
            404: {"model": Problem, "description": "no such repository, or its forge is off"},
            502: {"model": Problem, "description": "the forge did not answer"},
        },
    )
    async def effective_settings(
        repo: Annotated[str | None, Query(max_length=300)] = None,
        user: Annotated[str | None, Query(max_length=100)] = None,
        forge: ForgeKind | None = None,
    ) -> EffectiveSettings:
        """The settings a task for this repository (its ``.agent.yaml`` on the default
        branch) requested by this person (``user_config_api``) would start with, secrets
        masked; ``forge`` defaults to the one configured (GitHub when both are)."""
        kind = forge or next(iter(sorted(runtime.forges)), ForgeKind.GITHUB)
        if repo and runtime.forge(kind) is None:
            raise HTTPException(404, f"{kind.value} is not configured on this bot")
        try:
            planning, problem = await task_settings.settings_for(
                runtime, forge=kind, repo=repo, user=user
            )
        except (NotFound, AccessDenied) as exc:
            raise HTTPException(404, f"repository {repo} cannot be read: {exc}") from None
        except ForgeError as exc:
            raise HTTPException(502, f"the forge did not answer: {exc}") from None
        merged = planning.as_data()
        return EffectiveSettings(
            repo=repo,
            user=user,
            forge=kind,
            overrides_applied=merged["applied"],
            refused=merged["refused"],
            repo_config_error=problem,
            settings=masked(planning.apply_to(settings())),
        )

    return api


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


def switch_state(switch: operator.Switch) -> SwitchState:
    return SwitchState(
        paused=switch.paused, by=switch.by, since=switch.since, tasks=list(switch.tasks)
    )
