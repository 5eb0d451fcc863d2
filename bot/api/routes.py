"""The REST API's endpoints and its one list of routes (mounted at ``/api`` by the app).

Tasks (listed, shown, started on an issue, stopped), their reports and artifacts, the
operator's actions, the emergency stop, the settings a task would start with, and the
configuration file (``config_file.py``). Each endpoint takes its validated parameters and
returns its typed answer or raises a ``Refusal``; ``operations.py`` serves them behind
the bearer token and describes them at ``/openapi.json``.
"""

from __future__ import annotations

import asyncio
import mimetypes
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from bot.api.config_file import ConfigApi
from bot.api.eval_runs import EvalRuns
from bot.api.eval_task import EvalTasks
from bot.api.models import (
    Action,
    ActionResult,
    ActiveTask,
    ConfigCheck,
    ConfigFile,
    ConfigPut,
    ConfigRefused,
    ConfigSaved,
    ConfigText,
    EffectiveSettings,
    Extensions,
    ModelNotReady,
    NewTask,
    NewTicket,
    NoParameters,
    RunFiles,
    SettingsQuery,
    SwitchState,
    TaskAction,
    TaskAnswer,
    TaskCreated,
    TaskDetail,
    TaskFile,
    TaskFilter,
    TaskId,
    TaskPage,
    TaskReject,
    TicketCreated,
    detail,
    summary,
    switch_state,
)
from bot.api.operations import Body, Guard, Operation, OperationRoute, Refusal, describe
from bot.api.status import Status, extension_list, gather
from bot.api.task_start import open_ticket, run_files, start_task
from bot.config import CurrentSettings, masked
from bot.config.user_service import UserConfigService
from bot.dashboard.live import RatesCache
from bot.events import ForgeKind
from bot.forges.base import AccessDenied, ForgeError, ForgeLookup, NotFound
from bot.llm.base import HealthReport
from bot.paths import PathRefused, resolve_inside
from bot.storage.base import Checkpoints, Task
from bot.worker import operator, task_settings
from bot.worker.extensions import Extension

TITLE, VERSION = "Coding agent bot API", "1"
UNKNOWN = {404: "no such task"}
MARKDOWN = {"text/markdown": {"schema": {"type": "string"}}}
ANY_FILE = {"*/*": {"schema": {"type": "string"}}}
YAML_TYPES = ("application/yaml", "text/yaml", "text/plain")
CHANGE = {**UNKNOWN, 409: "the task cannot do that now"}


class ApiStore(operator.OperatorStore, Checkpoints, Protocol):
    """The tasks, their messages and checkpoints, the emergency stop's mark."""


class TaskApi:
    """The endpoints, with what they use: the store, the settings now, the forges, the
    people's planning settings service."""

    def __init__(
        self,
        store: ApiStore,
        *,
        settings: CurrentSettings,
        forges: ForgeLookup,
        user_config: UserConfigService,
        llm_health: Callable[[], Awaitable[HealthReport]],
        wake: Callable[[], None],
        config: ConfigApi,
        slots: int = 0,
        extensions: Callable[[], Awaitable[list[Extension]]] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.forges = forges
        self.user_config = user_config
        self.llm_health = llm_health
        self.wake = wake
        self.config = config
        self.slots = slots
        self.extensions = extensions
        self.rates = RatesCache()

    def _author(self) -> str:
        return f"{self.settings().server.api_token_name} (API)"

    async def _task(self, task_id: str) -> Task:
        try:
            return await operator.find_task(self.store, task_id)
        except operator.OperatorError as exc:
            raise Refusal(404, str(exc)) from None

    async def list_tasks(self, query: TaskFilter) -> TaskPage:
        """Tasks, newest first, filtered by state, forge and repository."""
        states = frozenset({query.state}) if query.state is not None else None
        found = await self.store.list_tasks(
            states=states, limit=query.offset + query.limit + 10_000
        )
        matching = [
            t
            for t in found
            if (query.forge is None or t.request.issue.repo.forge is query.forge)
            and (query.repository is None or t.request.issue.repo.full_name == query.repository)
        ]
        page = matching[query.offset : query.offset + query.limit]
        return TaskPage(
            tasks=[summary(t) for t in page],
            total=len(matching),
            offset=query.offset,
            limit=query.limit,
        )

    async def show_task(self, params: TaskId) -> TaskDetail:
        """A task: state, stage, plan with each item's status, timeline, tokens, links."""
        task = await self._task(params.task_id)
        checkpoint = await self.store.load_checkpoint(task.id)
        settings = self.settings()
        return detail(task, checkpoint, settings.data_dir, settings.observability)

    async def task_report(self, params: TaskId) -> Response:
        """The task's run report (report.md)."""
        task = await self._task(params.task_id)
        report = self.settings().data_dir / "runs" / task.id / "report.md"
        if not report.is_file():
            raise Refusal(404, "this task has no run report yet")
        return PlainTextResponse(report.read_text(encoding="utf-8"), media_type="text/markdown")

    async def task_artifact(self, params: TaskFile) -> Response:
        """A file of the task's run directory (never anything outside it)."""
        task = await self._task(params.task_id)
        run_dir = self.settings().data_dir / "runs" / task.id
        try:
            found = resolve_inside(run_dir, params.path) if run_dir.is_dir() else None
        except PathRefused as exc:
            raise Refusal(404, f"not in the run directory: {exc}") from None
        if found is None or not found.is_file() or found.is_symlink():
            raise Refusal(404, "no such file in the run directory")
        kind = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
        return FileResponse(found, media_type=kind)

    async def list_artifacts(self, params: TaskId) -> RunFiles:
        """The files of the task's run directory (``GET .../artifacts/{path}`` reads one)."""
        task = await self._task(params.task_id)
        run_dir = self.settings().data_dir / "runs" / task.id
        return RunFiles(task_id=task.id, files=await asyncio.to_thread(run_files, run_dir))

    async def create_task(self, params: NewTask, *, by: str | None = None) -> TaskCreated:
        """Start a task on an issue, as its command would (one active task per issue),
        requested by the token's name; refused with the set-up steps when the model is
        not ready."""
        created = await start_task(
            self.store, self.forges, self.settings(), self.llm_health, params,
            by=by or self._author(),
        )  # fmt: skip
        self.wake()
        return created

    async def create_ticket(self, params: NewTicket) -> TicketCreated:
        """Open an issue in a repository of a configured forge, labelled to start a task,
        and start it (requested by the token's name: the token is the operator's)."""
        made = await open_ticket(
            self.store, self.forges, self.settings(), params, by=self._author()
        )
        self.wake()
        return made

    async def stop_task(self, params: TaskId) -> ActionResult:
        """Stop the task at its next safe point (its work so far is kept on its branch)."""
        return await self.act(TaskAction(task_id=params.task_id, action=Action.STOP))

    async def reject(self, params: TaskReject, *, by: str | None = None) -> ActionResult:
        """Reject what the task waits for (its plan, a revision, a tool call), with the
        reason it revises by, as ``/agent reject <reason>``."""
        return await self._command(
            params.task_id, operator.TaskCommand.REJECT, params.reason, by=by
        )

    async def answer(self, params: TaskAnswer, *, by: str | None = None) -> ActionResult:
        """Answer what the task asked (it waits for input), as a comment in its issue would."""
        author = by or self._author()
        try:
            task = await operator.answer(self.store, params.task_id, params.text, by=author)
        except operator.OperatorError as exc:
            status = 404 if isinstance(exc, operator.UnknownTask) else 409
            raise Refusal(status, str(exc)) from None
        detail = "sent; the task reads it at its next safe point"
        return ActionResult(task_id=task.id, action="answer", by=author, detail=detail)

    async def _command(
        self, task_id: str, command: operator.TaskCommand, args: str = "", by: str | None = None
    ) -> ActionResult:
        by = by or self._author()
        try:
            task = await operator.command(self.store, task_id, command, by=by, args=args)
        except operator.OperatorError as exc:
            status = 404 if isinstance(exc, operator.UnknownTask) else 409
            raise Refusal(status, str(exc)) from None
        detail = "sent; the task acts on it at its next safe point"
        return ActionResult(task_id=task.id, action=command.value, by=by, detail=detail)

    async def act(self, params: TaskAction, *, by: str | None = None) -> ActionResult:
        """The same effect as the issue's command, with the API token's name as author."""
        by, action = by or self._author(), params.action
        if action is not Action.RETRY:
            return await self._command(params.task_id, operator.TaskCommand(action), by=by)
        try:
            created = await operator.retry(self.store, params.task_id, by=by)
        except operator.OperatorError as exc:
            status = 404 if isinstance(exc, operator.UnknownTask) else 409
            raise Refusal(status, str(exc)) from None
        self.wake()
        return ActionResult(
            task_id=created.id, action=action.value, by=by, detail="a new task is queued"
        )

    async def pause_all(self, params: NoParameters) -> SwitchState:
        """Emergency stop: running tasks pause at their next safe point, queued ones wait."""
        return switch_state(await operator.pause_all(self.store, by=self._author()))

    async def resume_all(self, params: NoParameters) -> SwitchState:
        """End the emergency stop and resume the tasks it paused."""
        await operator.resume_all(self.store, by=self._author())
        return switch_state(await operator.read_switch(self.store))

    async def switch(self, params: NoParameters) -> SwitchState:
        """Whether the emergency stop is set."""
        return switch_state(await operator.read_switch(self.store))

    async def status(self, params: NoParameters) -> Status:
        """Workers (alive, busy, lease age), queue depth, tasks by state, success rate over
        24 h and 7 days, the model's health and the emergency stop: what the dashboard's
        overview shows."""
        settings = self.settings()
        return await gather(
            self.store,
            rates=self.rates,
            llm_health=self.llm_health,
            slots=self.slots,
            lease_seconds=settings.worker.lease_seconds,
        )

    async def list_extensions(self, params: NoParameters) -> Extensions:
        """Each configured MCP server: started as a task starts it, its state and tools
        (probed at most once a minute)."""
        return extension_list(await self.extensions() if self.extensions is not None else [])

    async def effective_settings(self, query: SettingsQuery) -> EffectiveSettings:
        """The settings a task for this repository (its ``.agent.yaml`` on the default
        branch) requested by this person (``user_config_api``) would start with, secrets
        masked; ``forge`` defaults to the one configured (GitHub when both are)."""
        configured = [kind for kind in sorted(ForgeKind) if self.forges(kind) is not None]
        kind = query.forge or next(iter(configured), ForgeKind.GITHUB)
        client = self.forges(kind)
        if query.repo and client is None:
            raise Refusal(404, f"{kind.value} is not configured on this bot")
        settings = self.settings()
        try:
            planning, problem = await task_settings.settings_for(
                settings, client, self.user_config, forge=kind, repo=query.repo, user=query.user
            )
        except (NotFound, AccessDenied) as exc:
            raise Refusal(404, f"repository {query.repo} cannot be read: {exc}") from None
        except ForgeError as exc:
            raise Refusal(502, f"the forge did not answer: {exc}") from None
        merged = planning.as_data()
        return EffectiveSettings(
            repo=query.repo,
            user=query.user,
            forge=kind,
            overrides_applied=merged["applied"],
            refused=merged["refused"],
            repo_config_error=problem,
            settings=masked(planning.apply_to(settings)),
        )

    def operations(self) -> list[Operation[Any]]:
        """Every operation, in the order the router tries them."""
        config = self.config
        return [
            Operation("GET", "/tasks", self.list_tasks, TaskFilter, TaskPage),
            Operation(
                "POST", "/tasks", self.create_task, NewTask, TaskCreated, status=201,
                body=Body(fields=("issue_url", "instructions", "mode")),
                refusals={
                    404: "not an issue on a forge this bot serves, or it cannot be read",
                    409: "the issue is closed, or has an active task (task_id)",
                    502: "the forge did not answer",
                    503: "the model is not ready: what to do (setup_steps)",
                },
                refusal_models={409: ActiveTask, 503: ModelNotReady},
            ),
            Operation(
                "POST", "/tickets", self.create_ticket, NewTicket, TicketCreated, status=201,
                body=Body(fields=("forge", "repository", "title", "body")),
                refusals={
                    404: "the forge is not configured, or the repository cannot be written",
                    502: "the forge did not answer",
                },
            ),
            Operation(
                "GET", "/tasks/{task_id}", self.show_task, TaskId, TaskDetail, refusals=UNKNOWN
            ),
            Operation(
                "GET", "/tasks/{task_id}/report", self.task_report, TaskId,
                content=MARKDOWN, refusals=UNKNOWN,
            ),
            Operation(
                "DELETE", "/tasks/{task_id}", self.stop_task, TaskId, ActionResult,
                refusals=CHANGE,
            ),
            Operation(
                "GET", "/tasks/{task_id}/artifacts", self.list_artifacts, TaskId, RunFiles,
                refusals=UNKNOWN,
            ),
            Operation(
                "GET", "/tasks/{task_id}/artifacts/{path:path}", self.task_artifact, TaskFile,
                content=ANY_FILE, refusals=UNKNOWN,
            ),
            Operation(
                "POST", "/tasks/{task_id}/reject", self.reject, TaskReject, ActionResult,
                body=Body(fields=("reason",)), refusals=CHANGE,
            ),
            Operation(
                "POST", "/tasks/{task_id}/answer", self.answer, TaskAnswer, ActionResult,
                body=Body(fields=("text",)), refusals=CHANGE,
            ),
            Operation(
                "POST", "/tasks/{task_id}/{action}", self.act, TaskAction, ActionResult,
                refusals=CHANGE,
            ),
            Operation("POST", "/pause-all", self.pause_all, NoParameters, SwitchState),
            Operation("POST", "/resume-all", self.resume_all, NoParameters, SwitchState),
            Operation("GET", "/pause-all", self.switch, NoParameters, SwitchState),
            Operation("GET", "/status", self.status, NoParameters, Status),
            Operation("GET", "/extensions", self.list_extensions, NoParameters, Extensions),
            Operation(
                "GET", "/settings/effective", self.effective_settings, SettingsQuery,
                EffectiveSettings,
                refusals={
                    404: "no such repository, or its forge is off",
                    502: "the forge did not answer",
                },
            ),
            Operation(
                "GET", "/config", config.show_config, NoParameters, ConfigFile,
                refusals={404: "the bot runs without a configuration file"},
            ),
            Operation(
                "POST", "/config/validate", config.validate_config, ConfigText, ConfigCheck,
                body=Body(text="text", media_types=YAML_TYPES),
            ),
            Operation(
                "PUT", "/config", config.replace_config, ConfigPut, ConfigSaved,
                body=Body(text="text", media_types=YAML_TYPES), headers={"if_match": "If-Match"},
                refusals={
                    403: "it changes keys only the file on the host may change (problems)",
                    409: "the file changed since it was read (its hash), or cannot be written",
                    422: "the configuration is not valid (problems, key by key), or no If-Match",
                },
                refusal_models={403: ConfigRefused, 422: ConfigRefused},
            ),
        ]  # fmt: skip


def api_routes(api: TaskApi, guard: Guard) -> list[BaseRoute]:
    """The routes under ``/api`` (tasks', eval runs'), each behind ``guard``; ``/openapi.json``."""
    evals = [*EvalRuns(api.settings).operations(), *EvalTasks(api.settings).operations()]
    operations = [*api.operations(), *evals]
    routes: list[BaseRoute] = [OperationRoute(op, guard) for op in operations]
    description = describe(routes, title=TITLE, version=VERSION)

    async def openapi(request: Request) -> Response:
        return JSONResponse(description)

    return [*routes, Route("/openapi.json", openapi, include_in_schema=False)]
