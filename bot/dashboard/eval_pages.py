"""The dashboard's eval pages, read only: the runs of ``bot eval run`` in the runs folder
(``eval.runs_dir``), one run (its figures and each task's result) and one task's trajectory
shown as a task's page shows a task (its planning history as the timeline, its run report).

The folders are read as ``GET /api/eval/runs`` reads them (``api/eval_runs.py``): an id
that names anything but an entry of the runs folder is refused with 404."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from bot.api.eval_runs import EvalRuns, NotInRuns, show_run, timeline, trajectory
from bot.api.models import NoParameters
from bot.api.routes import TaskApi
from bot.dashboard import web


class EvalPages:
    def __init__(self, api: TaskApi, token: str) -> None:
        self.runs_api = EvalRuns(api.settings)
        self.token = token

    def _missing(self, request: Request, why: str) -> Response:
        return web.page(self.token, "login.html", request, 404, title="Not found", error=why)

    async def runs(self, request: Request) -> Response:
        if not web.logged_in(self.token, request):
            return web.to_login()
        found = await self.runs_api.list_eval_runs(NoParameters())
        return web.page(
            self.token, "eval_runs.html", request, title="Eval runs",
            runs=[r.model_dump() for r in found.runs], folder=str(self.runs_api.root),
        )  # fmt: skip

    async def run(self, request: Request) -> Response:
        if not web.logged_in(self.token, request):
            return web.to_login()
        try:
            shown = await asyncio.to_thread(
                show_run, self.runs_api.root, request.path_params["run_id"]
            )
        except NotInRuns as exc:
            return self._missing(request, str(exc))
        return web.page(
            self.token, "eval_run.html", request, title=f"Eval run {shown.id}",
            run=shown.model_dump(),
        )  # fmt: skip

    async def task(self, request: Request) -> Response:
        """A task of a run: its result, and its trajectory as a task's page shows it."""
        if not web.logged_in(self.token, request):
            return web.to_login()
        run_id, instance_id = request.path_params["run_id"], request.path_params["instance_id"]
        try:
            result, folder = await asyncio.to_thread(
                trajectory, self.runs_api.root, run_id, instance_id
            )
        except NotInRuns as exc:
            return self._missing(request, str(exc))
        entries = await asyncio.to_thread(timeline, folder)
        report = await asyncio.to_thread(web.read_report, folder / "report.md")
        return web.page(
            self.token, "eval_task.html", request, title=f"Eval task {instance_id}",
            run_id=run_id, instance_id=instance_id,
            result=result.model_dump() if result is not None else None,
            timeline=[e.model_dump() for e in entries], report=report,
        )  # fmt: skip
