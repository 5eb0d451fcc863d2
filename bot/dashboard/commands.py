"""The dashboard's commands: start a task on an issue's address, steer a task from its
page (approve, reject with a reason, answer, stop, pause, resume, retry), open an issue
labelled to start a task. Each is a form posted to this origin with the login cookie
(``web.allowed``), and each calls the API's own operation (``TaskApi``): the page, the
REST API and ``/mcp`` cannot part."""

from __future__ import annotations

from collections.abc import Awaitable
from enum import StrEnum
from typing import Protocol
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bot.api.models import (
    Action,
    NewTask,
    NewTaskMode,
    NewTicket,
    TaskAction,
    TaskAnswer,
    TaskReject,
)
from bot.api.operations import Refusal
from bot.api.routes import TaskApi
from bot.dashboard import web
from bot.events import ForgeKind

REFUSED = Response("refused", status_code=403)


class TaskView(Protocol):
    """A task's page, with why the action asked for was refused (``Dashboard.task_view``)."""

    def __call__(
        self, request: Request, *, status: int = 200, error: str = "", done: str = ""
    ) -> Awaitable[Response]: ...


class Steering(StrEnum):
    """A button of a task's page: the API's actions, and the two that take a text."""

    APPROVE = "approve"
    REJECT = "reject"
    ANSWER = "answer"
    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"
    RETRY = "retry"


STEERING = tuple(step.value for step in Steering)


class Commands:
    """The command form (``/dashboard/new``) and the task page's buttons, over ``api``."""

    def __init__(self, api: TaskApi, token: str, task_view: TaskView) -> None:
        self.api = api
        self.token = token
        self.task_view = task_view

    def _by(self) -> str:
        return f"{self.api.settings().server.api_token_name} (dashboard)"

    def _forges(self) -> list[str]:
        return [kind.value for kind in sorted(ForgeKind) if self.api.forges(kind) is not None]

    async def _form_page(
        self, request: Request, status: int = 200, *, error: str = "",
        steps: list[str] | None = None, entered: dict[str, str] | None = None, notice: str = "",
    ) -> Response:  # fmt: skip
        health = (await self.api.llm_health()).to_dict()
        return web.page(
            self.token, "new.html", request, status, title="Start a task", health=health,
            error=error, steps=steps or [], entered=entered or {}, forges=self._forges(),
            notice=notice,
        )  # fmt: skip

    async def new_page(self, request: Request) -> Response:
        if not web.logged_in(self.token, request):
            return web.to_login()
        return await self._form_page(request)

    async def start(self, request: Request) -> Response:
        """Start a task as ``POST /api/tasks`` does; the model's refusal shows its steps."""
        if not web.allowed(self.token, request):
            return REFUSED
        fields = await web.form(request, limit=64_000)
        if fields is None:
            return await self._form_page(request, 413, error="The form is too large.")
        try:
            mode = NewTaskMode(fields.get("mode", NewTaskMode.RUN.value))
            params = NewTask(
                issue_url=fields.get("issue_url", "").strip(),
                instructions=fields.get("instructions", ""),
                mode=mode,
            )
        except ValueError:
            return await self._form_page(
                request, 422, error="Give the issue's web address (http or https).",
                entered=fields,
            )  # fmt: skip
        try:
            created = await self.api.create_task(params, by=self._by())
        except Refusal as exc:
            steps = [str(s) for s in exc.extra.get("setup_steps", [])] if exc.extra else []
            return await self._form_page(
                request, exc.status, error=exc.detail, steps=steps, entered=fields
            )
        return RedirectResponse(f"/dashboard?started={created.task_id}", status_code=303)

    async def steer(self, request: Request) -> Response:
        """One of the task page's buttons, as the API's operation of the same name."""
        if not web.allowed(self.token, request):
            return REFUSED
        task_id, action = request.path_params["task_id"], request.path_params["action"]
        fields = await web.form(request, limit=64_000)
        if fields is None or action not in STEERING:
            return Response("not a command of this page", status_code=400)
        step, by = Steering(action), self._by()
        try:
            match step:
                case Steering.REJECT:
                    reason = fields.get("reason", "")
                    params = TaskReject(task_id=task_id, reason=reason)
                    result = await self.api.reject(params, by=by)
                case Steering.ANSWER:
                    text = fields.get("text", "")
                    result = await self.api.answer(TaskAnswer(task_id=task_id, text=text), by=by)
                case _:
                    result = await self.api.act(
                        TaskAction(task_id=task_id, action=Action(step.value)), by=by
                    )
        except Refusal as exc:
            return await self.task_view(request, status=exc.status, error=exc.detail)
        except ValueError:  # a parameter the models refuse (its length)
            error = "The reason or answer is too long."
            return await self.task_view(request, status=422, error=error)
        query = urlencode({"done": action})
        return RedirectResponse(f"/dashboard/tasks/{result.task_id}?{query}", status_code=303)

    async def ticket(self, request: Request) -> Response:
        """Open an issue labelled to start a task, as ``POST /api/tickets`` does."""
        if not web.allowed(self.token, request):
            return REFUSED
        fields = await web.form(request, limit=64_000)
        if fields is None:
            return await self._form_page(request, 413, error="The form is too large.")
        try:
            params = NewTicket(
                forge=ForgeKind(fields.get("forge", "")),
                repository=fields.get("repository", "").strip(),
                title=fields.get("title", "").strip(),
                body=fields.get("body", ""),
            )
        except ValueError:
            return await self._form_page(
                request, 422, error="Give the forge, the repository (owner/name) and a title.",
                entered=fields,
            )  # fmt: skip
        try:
            made = await self.api.create_ticket(params)
        except Refusal as exc:
            return await self._form_page(request, exc.status, error=exc.detail, entered=fields)
        notice = f"Opened {made.web_url}, labelled {made.label!r}: a task starts on it."
        return await self._form_page(request, 201, notice=notice)
