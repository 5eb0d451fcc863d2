"""One run of one leased task: build its context and tools, run the coordinator, turn
what happened into an Outcome (forge refusals, transient forge errors, crashes), and
store that outcome, re-queuing the task if a reply slipped in while it settled.

Leasing and lease renewal are the worker's (bot/worker/loop.py); the decisions are pure
functions in bot/worker/outcomes.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from typing import Any, Protocol

from bot import metrics, tracing
from bot.agent.loop import AgentLoop
from bot.agent.session import TaskContext
from bot.comments.render import agent_comment
from bot.comments.reporter import IssueReporter
from bot.config import Settings, secret_values
from bot.config.overrides import EffectivePlanning, Layer
from bot.events import TaskMode
from bot.forges.base import AccessDenied, Forge, ForgeError, NotFound
from bot.record.snapshot import run_traces, status_snapshot
from bot.record.state import consumed_message_seq
from bot.run_events import Outcome, SettingsRefused
from bot.runtime import Runtime
from bot.storage.base import ACTIVE_STATES, Task, TaskState
from bot.storage.runs import RunDirectory
from bot.tools.factory import build_tools
from bot.tools.repo_config import RepoConfigError, load_repo_config
from bot.worker.outcomes import (
    crashed,
    forge_failure,
    invalid_repo_config,
    may_have_missed_reply,
    may_retry_task,
    planning_disabled,
    refused,
)
from bot.worker.task_settings import task_planning

log = logging.getLogger("bot.worker")  # the worker's log, whichever of its modules writes

LATE_REPORT_SECONDS = 60.0


class Coordinator(Protocol):
    async def run(self, ctx: TaskContext) -> Outcome: ...


def default_coordinator() -> Coordinator:
    return AgentLoop()


class TaskRunner:
    """Runs leased tasks for one worker (``owner``) and stores their outcomes."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        owner: str,
        coordinator_factory: Callable[[], Coordinator],
        clock: Callable[[], float],
        wake: Callable[[], None],
    ) -> None:
        self.runtime = runtime
        self.store = runtime.store
        self.owner = owner
        self.coordinator_factory = coordinator_factory
        self._clock = clock
        self._wake = wake

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    async def run(self, task: Task) -> Outcome:
        """Run the task to its next resting state; store nothing."""
        issue = task.request.issue
        forge = self.runtime.forge(issue.repo.forge)
        if forge is None:
            return Outcome(TaskState.FAILED, reason=f"{issue.repo.forge.value} is not configured")
        checkpoint = await self.store.load_checkpoint(task.id)
        reporter = IssueReporter(self.runtime, task, forge)
        with tracing.task_run(task.id, issue, task.request, earlier=run_traces(checkpoint)) as span:
            try:
                outcome = await self._run_reported(task, forge, reporter, checkpoint)
            finally:  # also on cancellation: no coalesced status edit may land afterwards
                await reporter.aclose()
            failed = outcome.state is TaskState.FAILED
            tracing.ended(span, outcome.state.value, outcome.reason, failed=failed)
            return outcome

    async def report_late(self, task: Task, outcome: Outcome) -> None:
        """Say an outcome reached without the run (the watchdog's): the closing comment,
        status and labels, within a bound, since the forge may be what stalled."""
        forge = self.runtime.forge(task.request.issue.repo.forge)
        if forge is None:
            return
        reporter = IssueReporter(self.runtime, task, forge)
        try:
            async with asyncio.timeout(LATE_REPORT_SECONDS):
                await reporter.recover(await self._snapshot(task))
                await reporter.end(outcome)
        except (ForgeError, TimeoutError) as exc:
            log.warning(
                "task %s: could not report %s on the issue: %s", task.id, outcome.state, exc
            )

    async def _snapshot(self, task: Task) -> dict[str, Any] | None:
        """What the status comment showed of the task, from its checkpoint."""
        return status_snapshot(await self.store.load_checkpoint(task.id))

    async def settle(self, task_id: str, outcome: Outcome) -> None:
        """Store the outcome, unless another worker has taken the task meanwhile."""
        stored = await self.store.set_state(
            task_id,
            outcome.state,
            error=outcome.reason or None,
            wake_at=outcome.wake_at,
            expect_owner=self.owner,
        )
        if not stored:
            log.error("task %s: lease lost before its outcome could be stored", task_id)
        else:
            await self._requeue_if_answered(task_id, outcome)
        if outcome.state not in ACTIVE_STATES:
            metrics.TASKS.labels(outcome.state.value).inc()
            task = await self.store.get_task(task_id)
            if task is not None:
                ended = max(0.0, task.updated_at - task.created_at)
                metrics.TASK_DURATION.labels(outcome.state.value).observe(ended)

    async def _requeue_if_answered(self, task_id: str, outcome: Outcome) -> None:
        """A reply that arrived while the task was still running (after its last look
        at its messages, before its waiting state was stored) did not re-queue it: the
        dispatcher only re-queues tasks already waiting. Re-queue it now, if its
        checkpoint has not seen every message."""
        if not may_have_missed_reply(outcome):
            return
        seen = consumed_message_seq(await self.store.load_checkpoint(task_id))
        if seen is None or not await self.store.messages_after(task_id, seen):
            return
        requeued = await self.store.set_state(
            task_id, TaskState.QUEUED, error=outcome.reason or None, expect_state=outcome.state
        )
        if requeued:
            log.info("task %s: a reply came in while it ran; re-queued", task_id)
            self._wake()

    async def _run_reported(
        self, task: Task, forge: Forge, reporter: IssueReporter, checkpoint: dict[str, Any] | None
    ) -> Outcome:
        try:
            await reporter.begin(status_snapshot(checkpoint))
            async with contextlib.AsyncExitStack() as stack:
                ctx = await self._context(task, forge, reporter, stack)
                if isinstance(ctx, Outcome):
                    outcome = ctx
                else:
                    outcome = await self.coordinator_factory().run(ctx)
        except (NotFound, AccessDenied) as exc:
            log.warning("task %s: the forge refuses: %s", task.id, exc)
            return refused(exc)
        except ForgeError as exc:
            if may_retry_task(task.attempts):
                log.warning("task %s: forge error, will retry: %s", task.id, exc)
            return forge_failure(exc, attempts=task.attempts, now=self._clock())
        except Exception as exc:
            log.exception("task %s crashed", task.id)
            outcome = crashed(exc)
        with contextlib.suppress(ForgeError):
            await reporter.end(outcome)
        if outcome.state not in ACTIVE_STATES:
            self._clean_workspace(task.id)
        return outcome

    async def _context(
        self,
        task: Task,
        forge: Forge,
        reporter: IssueReporter,
        stack: contextlib.AsyncExitStack,
    ) -> TaskContext | Outcome:
        """The task's context with its tools, or the Outcome that stops it before it starts."""
        issue = task.request.issue
        if not self.settings.planning.enabled:
            return planning_disabled()
        info = await forge.get_repo_info(issue.repo)
        try:
            repo_config = await load_repo_config(forge, issue.repo, info.default_branch)
        except RepoConfigError as exc:
            return invalid_repo_config(exc)
        planning = await task_planning(
            self.runtime,
            self.settings,
            forge=issue.repo.forge,
            user=task.request.requested_by,
            repo_config=repo_config,
        )
        await self._say_refused(task, planning, reporter)
        settings = planning.apply_to(self.settings)
        if not settings.planning.enabled:
            return planning_disabled(planning.origin.get("enabled", Layer.SERVER))
        branch = None
        if task.request.mode is TaskMode.FOLLOW_UP and issue.head_branch:
            branch = issue.head_branch
        built = await build_tools(
            settings=settings,
            forge=forge,
            issue=issue,
            task_id=task.id,
            base_branch=info.default_branch,
            repo_config=repo_config,
            stack=stack,
            finish_comment=agent_comment(task.id, secret_values(settings)),
            branch=branch,
            run_dir=RunDirectory(self.settings.data_dir, task.id).path,
        )
        for note in built.notes:
            log.info("task %s: %s", task.id, note)
        return TaskContext(
            task=task,
            issue=issue,
            settings=settings,
            store=self.store,
            forge=forge,
            llm=self.runtime.llm,
            tools=built.registry,
            emit=reporter.handle,
            data_dir=self.settings.data_dir,
            workspace=built.workspace.path,
            built=built,
            planning=planning,
        )

    async def _say_refused(
        self, task: Task, planning: EffectivePlanning, reporter: IssueReporter
    ) -> None:
        """One comment naming the refused planning keys (edited in place on later runs)."""
        if not planning.refused:
            return
        user = task.request.requested_by
        refused = [{**r.as_data(), "user": user} for r in planning.refused]
        await reporter.handle(SettingsRefused(refused=refused, seq=0))

    def _clean_workspace(self, task_id: str) -> None:
        path = self.settings.data_dir / "workspaces" / task_id
        shutil.rmtree(path, ignore_errors=True)
