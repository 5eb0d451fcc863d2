"""``bot run ISSUE_URL``: one task now, without a webhook (``--dry-run``: plan only)."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

from bot.agent.loop import AgentLoop
from bot.agent.session import TaskContext
from bot.comments.render import agent_comment
from bot.config import secret_values
from bot.events import TaskRequest
from bot.record.open_loop import open_plan
from bot.run_events import Outcome, ProgressEvent
from bot.runtime import Runtime
from bot.storage.base import TaskState
from bot.storage.sqlite import SqliteStore
from bot.tools.factory import build_tools
from bot.tools.repo_config import load_repo_config
from bot.worker import Worker
from bot.worker.task_settings import task_planning


async def run_once(runtime: Runtime, request: TaskRequest) -> Outcome:
    """Queue the task in the real store and run it in this process to its next rest."""
    task, created = await runtime.store.create_task(request)
    if not created:
        return Outcome(task.state, reason=f"task {task.id} is already active on this issue")
    worker = Worker(runtime, owner="cli")
    leased = await runtime.store.lease_task(worker.owner, runtime.settings.worker.lease_seconds)
    if leased is None or leased.id != task.id:
        return Outcome(TaskState.QUEUED, reason="another task was first in the queue; run a worker")
    return await worker.run_task(leased)


async def _ignore(event: ProgressEvent) -> None:
    del event


async def plan_once(runtime: Runtime, request: TaskRequest) -> dict[str, Any]:
    """Plan and return the planning document: no comment, label, branch or store write
    (a scratch store and data directory are thrown away afterwards)."""
    forge = runtime.forge(request.issue.repo.forge)
    assert forge is not None
    info = await forge.get_repo_info(request.issue.repo)
    repo_config = await load_repo_config(forge, request.issue.repo, info.default_branch)
    planning = await task_planning(
        runtime.user_config,
        runtime.settings,
        forge=request.issue.repo.forge,
        user=request.requested_by,
        repo_config=repo_config,
    )
    if not planning.apply_to(runtime.settings).planning.enabled:
        # planning is off: a task runs as one open tool loop, whose plan grows call by call
        return open_plan(request.issue.title, request.issue.body).to_document()
    with tempfile.TemporaryDirectory(prefix="bot-dry-run-") as scratch:
        settings = planning.apply_to(runtime.settings)
        settings = settings.model_copy(
            update={"storage": settings.storage.model_copy(update={"data_dir": Path(scratch)})}
        )
        store = SqliteStore(Path(scratch) / "dry-run.sqlite3")
        await store.open()
        try:
            task, _ = await store.create_task(request)
            async with contextlib.AsyncExitStack() as stack:
                built = await build_tools(
                    settings=settings,
                    forge=forge,
                    issue=request.issue,
                    task_id=task.id,
                    base_branch=info.default_branch,
                    repo_config=repo_config,
                    stack=stack,
                    finish_comment=agent_comment(task.id, secret_values(settings)),
                )
                ctx = TaskContext(
                    task=task,
                    issue=request.issue,
                    settings=settings,
                    store=store,
                    forge=forge,
                    llm=runtime.llm,
                    tools=built.registry,
                    emit=_ignore,
                    data_dir=Path(scratch),
                    built=built,
                    planning=planning,
                )
                plan = await AgentLoop().plan_only(ctx)
        finally:
            await store.close()
    return plan.to_document()
