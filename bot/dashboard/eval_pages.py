"""The dashboard's eval pages, read only: the runs of ``bot eval run`` in the runs folder
(``eval.runs_dir``), one run (its figures and each task's result) and one task: its
scoring (each FAIL_TO_PASS and PASS_TO_PASS test's status, the end of the tests' log, its
outcome, tokens by phase, cost and time) and its trajectory shown as a task's page shows a
task (the plan checklist and the timeline of its planning history, its run report), as
``GET /api/eval/runs/{run_id}/tasks/{instance_id}`` reads it (``api/eval_task.py``).

The folders are read as ``GET /api/eval/runs`` reads them (``api/eval_runs.py``): an id
that names anything but an entry of the runs folder is refused with 404."""

from __future__ import annotations

import asyncio
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from bot.api.eval_runs import EvalRuns, NotInRuns, show_run, task_folder
from bot.api.eval_task import EvalTask, show_task
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
            shown, report = await asyncio.to_thread(_task, self.runs_api.root, run_id, instance_id)
        except NotInRuns as exc:
            return self._missing(request, str(exc))
        task = shown.model_dump(mode="json")
        return web.page(
            self.token, "eval_task.html", request, title=f"Eval task {instance_id}",
            run_id=run_id, instance_id=instance_id, result=task["result"], tests=task["tests"],
            test_log=task["test_log"], plan=task["plan"], icons=web.ICONS,
            timeline=task["timeline"], report=report,
        )  # fmt: skip


def _task(root: Path, run_id: str, instance_id: str) -> tuple[EvalTask, str]:
    """A task as the API shows it, and its run report as a task's page shows one."""
    shown = show_task(root, run_id, instance_id)
    return shown, web.read_report(task_folder(root, run_id, instance_id) / "report.md")
