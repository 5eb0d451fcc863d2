"""The dashboard's pages at ``/dashboard``: server-rendered views of the queue, the tasks and the
emergency stop, for people with the API token (``BOT_API_TOKEN``); starting and steering
tasks (``commands.py``) and the settings page (``settings_page.py``), each through the
API's own operations.

A login form exchanges the token for a signed, HttpOnly, SameSite=Strict cookie
(``session.py``; Secure when the request came over HTTPS, as a proxy of
``server.forwarded_allow_ips`` may say; failed logins are throttled per client); the
pages refresh themselves every ``REFRESH`` (5) seconds, reading again only what they show
(``live.py``: a small JSON answer with an ETag; the whole page without script). The
emergency stop's buttons are forms posting to this same origin (the cookie is never sent
with a request from another site, and a request whose ``Origin`` is another host is
refused).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from bot.api.models import NoParameters, detail
from bot.api.routes import ApiStore, TaskApi
from bot.config import CurrentSettings
from bot.dashboard import live, session, web
from bot.dashboard.commands import STEERING, Commands
from bot.dashboard.eval_pages import EvalPages
from bot.dashboard.live import REFRESH, SHOWN_TASKS, when
from bot.dashboard.settings_page import SettingsPages
from bot.storage.base import TaskState
from bot.throttle import FailureThrottle
from bot.tools.quality import gate_steps, stored_result
from bot.worker import operator


class Dashboard:
    """The dashboard's pages, with what they use: the API's operations (``api``: the store,
    the settings now, the LLM's health, this process's worker ``slots``, 0 for a web
    replica), the API token and the ``throttle`` that counts each client's wrong tokens at
    the login form."""

    def __init__(self, api: TaskApi, *, token: str, throttle: FailureThrottle) -> None:
        self.api = api
        self.store: ApiStore = api.store
        self.settings: CurrentSettings = api.settings
        self.llm_health = api.llm_health
        self.token = token
        self.slots = api.slots
        self.throttle = throttle
        self.commands = Commands(api, token, self.task_view)
        self.settings_pages = SettingsPages(api, token)
        self.eval_pages = EvalPages(api, token)

    def routes(self, middleware: Sequence[Middleware] = ()) -> list[BaseRoute]:
        """The pages' routes, each behind ``middleware``."""
        pages = [
            ("/dashboard", self.overview, ["GET"]),
            ("/dashboard/login", self.login, ["GET", "POST"]),
            ("/dashboard/logout", self.logout, ["POST"]),
            ("/dashboard/live.json", self.overview_live, ["GET"]),
            ("/dashboard/live.js", self.script, ["GET"]),
            ("/dashboard/tasks/{task_id}", self.task_page, ["GET"]),
            ("/dashboard/tasks/{task_id}/live.json", self.task_live, ["GET"]),
            ("/dashboard/pause-all", self.switch, ["POST"]),
            ("/dashboard/resume-all", self.switch, ["POST"]),
            ("/dashboard/new", self.commands.new_page, ["GET"]),
            ("/dashboard/new", self.commands.start, ["POST"]),
            ("/dashboard/tickets", self.commands.ticket, ["POST"]),
            ("/dashboard/tasks/{task_id}/{action}", self.commands.steer, ["POST"]),
            ("/dashboard/settings", self.settings_pages.show, ["GET"]),
            ("/dashboard/settings", self.settings_pages.post, ["POST"]),
            ("/dashboard/eval", self.eval_pages.runs, ["GET"]),
            ("/dashboard/eval/{run_id}", self.eval_pages.run, ["GET"]),
            ("/dashboard/eval/{run_id}/tasks/{instance_id}", self.eval_pages.task, ["GET"]),
        ]
        return [
            Route(path, endpoint, methods=methods, middleware=middleware)
            for path, endpoint, methods in pages
        ]

    def _logged_in(self, request: Request) -> bool:
        return web.logged_in(self.token, request)

    def _page(self, name: str, request: Request, status: int = 200, **values: Any) -> HTMLResponse:
        return web.page(self.token, name, request, status, **values)

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            return self._page("login.html", request, title="Log in", error="")
        client = request.client.host if request.client is not None else None
        wait = self.throttle.retry_after(client)
        if wait is not None:
            refused = self._page(
                "login.html", request, 429, title="Log in",
                error=f"Too many wrong tokens from this address: try again in {wait} s.",
            )  # fmt: skip
            refused.headers["Retry-After"] = str(wait)
            return refused
        form = await web.form(request)
        if form is None or not session.token_matches(self.token, form.get("token", "")):
            self.throttle.failed(client)
            return self._page("login.html", request, 401, title="Log in", error="Wrong token.")
        response = RedirectResponse("/dashboard", status_code=303)
        response.set_cookie(
            session.COOKIE,
            session.issue(self.token, time.time()),
            max_age=session.LIFETIME,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/dashboard",
        )
        return response

    async def logout(self, request: Request) -> Response:
        response = _to_login()
        response.delete_cookie(session.COOKIE, path="/dashboard")
        return response

    async def _now(self) -> dict[str, Any]:
        """What the overview shows that changes: the switch, the counts, the rates, the
        model's line and the visible rows (the page and its refresh read the same)."""
        status = await self.api.status(NoParameters())
        return {
            "paused": bool(status.emergency_stop["paused"]),
            "queued": status.queue_depth,
            "running": status.tasks_by_state[TaskState.RUNNING.value],
            "busy": status.busy,
            "workers": [w.model_dump() for w in status.workers],
            "rates": live.rates_view(status.rates),
            "llm": live.llm_line(status.model),
            "tasks": live.task_rows(await self.store.list_tasks(limit=SHOWN_TASKS)),
        }

    async def overview(self, request: Request) -> Response:
        if not self._logged_in(request):
            return _to_login()
        switch = await operator.read_switch(self.store)
        return self._page(
            "overview.html",
            request,
            title="Overview",
            refresh=REFRESH,
            live="/dashboard/live.json",
            switch=switch,
            since=when(switch.since),
            slots=self.slots or self.settings().worker.max_workers,
            has_worker=self.slots > 0,
            now=await self._now(),
            started=request.query_params.get("started", "")[:40],
        )

    async def overview_live(self, request: Request) -> Response:
        """The overview's refresh: only what it shows, with an ETag."""
        if not self._logged_in(request):
            return JSONResponse({"detail": "log in"}, status_code=401)
        return live.conditional_json(request, await self._now())

    async def task_live(self, request: Request) -> Response:
        """A task page's refresh: the version of what it shows (its row and checkpoint)."""
        if not self._logged_in(request):
            return JSONResponse({"detail": "log in"}, status_code=401)
        task = await self.store.get_task(request.path_params["task_id"])
        if task is None:
            return JSONResponse({"detail": "no such task"}, status_code=404)
        version = live.task_version(task, await self.store.load_checkpoint(task.id))
        return live.conditional_json(request, {"version": version})

    async def script(self, request: Request) -> Response:
        return Response(
            _script(), media_type="text/javascript", headers={"Cache-Control": "no-cache"}
        )

    async def task_page(self, request: Request) -> Response:
        if not self._logged_in(request):
            return _to_login()
        done = request.query_params.get("done", "")
        return await self.task_view(request, done=done if done in STEERING else "")

    async def task_view(
        self, request: Request, *, status: int = 200, error: str = "", done: str = ""
    ) -> Response:
        """A task's page; ``error``: why the action just asked for was refused; ``done``:
        the action just sent."""
        try:
            task = await operator.find_task(self.store, request.path_params["task_id"])
        except operator.OperatorError as exc:
            return self._page("login.html", request, 404, title="Not found", error=str(exc))
        settings = self.settings()
        data_dir = settings.data_dir
        checkpoint = await self.store.load_checkpoint(task.id)
        shown = detail(task, checkpoint, data_dir, settings.observability)
        run_dir = data_dir / "runs" / task.id
        gate_result, gate = _gate_view(_quality(run_dir / "quality.json"))
        return self._page(
            "task.html",
            request,
            title=f"Task {task.id[:8]}",
            refresh=REFRESH,
            live=f"/dashboard/tasks/{task.id}/live.json",
            version=live.task_version(task, checkpoint),
            task=shown.model_dump(mode="json"),
            issue_link=web_link(shown.issue_url),
            links=[(name, value, web_link(value)) for name, value in shown.links.items()],
            icons=web.ICONS,
            gate=gate,
            gate_result=gate_result,
            report=web.read_report(run_dir / "report.md"),
            error=error,
            done=done,
            status=status,
        )

    async def switch(self, request: Request) -> Response:
        if not web.allowed(self.token, request):
            return Response("refused", status_code=403)
        by = f"{self.settings().server.api_token_name} (dashboard)"
        if request.url.path.endswith("/pause-all"):
            await operator.pause_all(self.store, by=by)
        else:
            await operator.resume_all(self.store, by=by)
        return RedirectResponse("/dashboard", status_code=303)


@functools.cache
def _script() -> str:
    """The pages' refresh script, as shipped beside the templates (read once)."""
    return resources.files("bot.dashboard").joinpath("templates/live.js").read_text("utf-8")


def _to_login() -> RedirectResponse:
    return web.to_login()


def web_link(url: str) -> str | None:
    """``url`` when it may be a link: an http(s) URL with a host. Anything else (a
    ``javascript:`` or ``data:`` URL from a forged payload, a relative path) is shown
    as text only."""
    if any(ord(c) < 33 or c in "\\<>\"'`" for c in url):
        return None  # browsers drop tabs and newlines and read backslashes as slashes
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return url if parts.scheme.lower() in ("http", "https") and parts.hostname else None


def _quality(path: Path) -> dict[str, Any] | None:
    """The last quality gate's stored report (None: it did not run, or is unreadable)."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def _gate_view(quality: dict[str, Any] | None) -> tuple[str, list[dict[str, str]]]:
    """The gate's verdict ("" when it did not run) and its steps as the status comment
    shows them (``gate_steps``): name, status, command, counts."""
    result = stored_result(quality)
    if quality is None or result is None:
        return "", []
    steps = [
        {
            "name": step["name"],
            "status": step["status"].replace("_", " "),
            "command": step["command"],
            "detail": ", ".join(f"{k}: {v}" for k, v in step["counts"].items()),
        }
        for step in gate_steps(quality)
    ]
    return result.value.replace("_", " "), steps
