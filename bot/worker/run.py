"""One run of one leased task: build its context and tools, run the coordinator, turn
what happened into an Outcome (forge refusals, transient forge errors, crashes), and
store that outcome, re-queuing the task if a reply slipped in while it settled.

Leasing and lease renewal are the worker's (bot/worker/loop.py); the decisions are pure
functions in bot/worker/outcomes.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from typing import Any, Protocol

from bot import metrics, tracing
from bot.agent.loop import AgentLoop
from bot.agent.session import RunStore, TaskContext
from bot.comments.render import agent_comment
from bot.comments.reporter import IssueReporter
from bot.config import CurrentSettings, Settings, secret_values, settings_digest
from bot.config.overrides import EffectivePlanning
from bot.config.user_service import UserConfigService
from bot.events import RoundKind, TaskMode
from bot.forges.base import AccessDenied, Forge, ForgeError, ForgeLookup, NotFound
from bot.llm.base import LLM
from bot.record.snapshot import run_traces, status_snapshot
from bot.record.state import consumed_message_seq
from bot.run_events import Outcome, SettingsRefused
from bot.sandbox.gitcmd import WorkspaceError
from bot.sandbox.tree_walk import remove_tree
from bot.storage.base import ACTIVE_STATES, CommentIds, StoreError, Task, Tasks, TaskState
from bot.storage.retry import PersistenceFailed, persist
from bot.storage.runs import RunDirectory
from bot.tools.factory import build_tools
from bot.tools.repo_config import RepoConfigError, load_repo_config
from bot.worker.hooks import HookedRun, TaskHook, hooked, unhooked
from bot.worker.outcomes import (
    crashed,
    forge_failure,
    invalid_repo_config,
    may_have_missed_reply,
    may_retry_task,
    merge_failed,
    refused,
    store_failing,
)
from bot.worker.task_settings import task_planning

log = logging.getLogger("bot.worker")  # the worker's log, whichever of its modules writes

LATE_REPORT_SECONDS = 60.0


def task_fields(task: Task, settings: Settings) -> dict[str, Any]:
    """What task.json says of a task when its run starts: the issue and its text (the
    body, and the instructions given with the command or over the API), who asked, the
    model and a digest of the settings the run uses."""
    issue = task.request.issue
    return {
        "description": issue.body,
        "instructions": task.request.instructions,
        "id": task.id,
        "issue": issue.web_url or issue.key,
        "title": issue.title,
        "repository": issue.repo.full_name,
        "requested_by": task.request.requested_by,
        "mode": task.request.mode.value,
        "model": {"provider": settings.llm.provider, "model": settings.llm.model},
        "settings_digest": settings_digest(settings),
        "attempt": task.attempts,
    }


class Coordinator(Protocol):
    async def run(self, ctx: TaskContext) -> Outcome: ...


def default_coordinator() -> Coordinator:
    return AgentLoop()


class RunnerStore(Tasks, RunStore, CommentIds, Protocol):
    """What a task's run uses of the store: the task's state, its record (checkpoint,
    messages, plan cache) and its comments' ids."""


class TaskRunner:
    """Runs leased tasks for one worker (``owner``) and stores their outcomes."""

    def __init__(
        self,
        store: RunnerStore,
        *,
        settings: CurrentSettings,
        forges: ForgeLookup,
        llm: Callable[[], LLM],
        user_config: UserConfigService,
        owner: str,
        coordinator_factory: Callable[[], Coordinator],
        clock: Callable[[], float],
        wake: Callable[[], None],
        hook: TaskHook | None = None,
    ) -> None:
        self.store = store
        self.hook = hook
        self._settings = settings
        self.forges = forges
        self.llm = llm
        self.user_config = user_config
        self.owner = owner
        self.coordinator_factory = coordinator_factory
        self._clock = clock
        self._wake = wake

    @property
    def settings(self) -> Settings:
        return self._settings()

    async def run(self, task: Task) -> Outcome:
        """Run the task to its next resting state; store nothing."""
        issue = task.request.issue
        taken = await self._take(task)
        if isinstance(taken, Outcome):
            return taken
        forge = taken.forge if taken is not None else self.forges(issue.repo.forge)
        if forge is None:
            return Outcome(TaskState.FAILED, reason=f"{issue.repo.forge.value} is not configured")
        reporter = self._reporter(task, forge)
        earlier = await self._earlier_traces(task)
        with tracing.task_run(task.id, issue, task.request, earlier=earlier) as span:
            try:
                outcome = await self._run_reported(task, forge, reporter, taken)
            finally:  # also on cancellation: no coalesced status edit may land afterwards
                await reporter.aclose()
            failed = outcome.state is TaskState.FAILED
            tracing.ended(span, outcome.state.value, outcome.reason, failed=failed)
            return outcome

    async def _take(self, task: Task) -> HookedRun | Outcome | None:
        """The hook's parts for a task that is the hook's (or the outcome it ends with);
        None for every other task."""
        if self.hook is not None and self.hook.claims(task):
            return await self.hook.take(task)
        return unhooked(task) if hooked(task) else None

    async def _earlier_traces(self, task: Task) -> list[str]:
        """The trace of each earlier run of the task (read only while traces are on; a
        store that cannot answer now only costs the link to the run before)."""
        if not tracing.enabled():
            return []
        try:
            return run_traces(await self.store.load_checkpoint(task.id))
        except StoreError as exc:
            log.warning("task %s: its earlier runs' traces could not be read: %s", task.id, exc)
            return []

    def _reporter(self, task: Task, forge: Forge) -> IssueReporter:
        return IssueReporter(task, forge, settings=self.settings, comment_ids=self.store)

    async def report_late(self, task: Task, outcome: Outcome) -> None:
        """Say an outcome reached without the run (the watchdog's): the closing comment,
        status and labels, within a bound, since the forge may be what stalled."""
        if self.hook is not None and self.hook.claims(task):
            forge = await self.hook.forge(task)  # no second `take`: the run is over
        else:
            forge = self.forges(task.request.issue.repo.forge)
        if forge is None:
            return
        reporter = self._reporter(task, forge)
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
        load = functools.partial(self.store.load_checkpoint, task.id)
        return status_snapshot(await persist(load, what="the checkpoint"))

    def _record(self, task_id: str, state: TaskState, *, reason: str = "", **fields: Any) -> None:
        """task.json follows the task: written when a run starts, updated with each
        outcome (docs/planning.md#run-directory); a run directory that cannot be
        written is logged, never a reason for the task to fail."""
        try:
            run_dir = RunDirectory(self.settings.data_dir, task_id)
            run_dir.update_task(fields, state=state.value, reason=reason)
        except (ValueError, OSError) as exc:
            log.warning("task %s: task.json not written: %s", task_id, exc)

    async def settle(self, task_id: str, outcome: Outcome) -> bool:
        """Store the outcome, unless another worker has taken the task meanwhile (False:
        nothing was stored, and what follows an outcome is that worker's)."""
        stored = await persist(
            lambda: self.store.set_state(
                task_id,
                outcome.state,
                error=outcome.reason or None,
                wake_at=outcome.wake_at,
                expect_owner=self.owner,
            ),
            what="the task's outcome",
        )
        if not stored:
            log.error("task %s: lease lost before its outcome could be stored", task_id)
        else:
            self._record(task_id, outcome.state, reason=outcome.reason)
            await self._requeue_if_answered(task_id, outcome)
        if outcome.state not in ACTIVE_STATES:
            metrics.TASKS.labels(outcome.state.value).inc()
            task = await self.store.get_task(task_id)
            if task is not None:
                ended = max(0.0, task.updated_at - task.created_at)
                metrics.TASK_DURATION.labels(outcome.state.value).observe(ended)
        return bool(stored)

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
            self._record(task_id, TaskState.QUEUED, reason="a reply came in while it ran")
            self._wake()

    async def _run_reported(
        self, task: Task, forge: Forge, reporter: IssueReporter, taken: HookedRun | None
    ) -> Outcome:
        try:
            await reporter.begin(await self._snapshot(task))
            async with contextlib.AsyncExitStack() as stack:
                ctx = await self._context(task, forge, reporter, stack, taken)
                if isinstance(ctx, Outcome):
                    outcome = ctx
                else:
                    outcome = await self.coordinator_factory().run(ctx)
        except (NotFound, AccessDenied) as exc:
            log.warning("task %s: the forge refuses: %s", task.id, exc)
            return refused(exc)
        except PersistenceFailed as exc:  # not this task's fault: pause it, stop the work
            log.error("task %s: %s; pausing it and setting the emergency stop", task.id, exc)
            outcome = store_failing()
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
        taken: HookedRun | None,
    ) -> TaskContext | Outcome:
        """The task's context with its tools, or the Outcome that stops it before it starts."""
        issue = task.request.issue
        server = taken.settings(self.settings) if taken is not None else self.settings
        info = await forge.get_repo_info(issue.repo)
        try:
            repo_config = await load_repo_config(forge, issue.repo, info.default_branch)
        except RepoConfigError as exc:
            return invalid_repo_config(exc)
        planning = await task_planning(
            self.user_config,
            server,
            forge=issue.repo.forge,
            user=task.request.requested_by,
            repo_config=repo_config,
        )
        await self._say_refused(task, planning, reporter)
        settings = planning.apply_to(server)  # planning.enabled false: the open loop
        self._record(task.id, TaskState.RUNNING, **task_fields(task, settings))
        branch = None
        if task.request.mode is TaskMode.FOLLOW_UP and issue.head_branch:
            branch = issue.head_branch
        found = task.request.round  # a round on the change request: against its own base
        base_branch = found.base_branch if found and found.base_branch else info.default_branch
        built = await build_tools(
            settings=settings,
            forge=forge,
            issue=issue,
            task_id=task.id,
            base_branch=base_branch,
            repo_config=repo_config,
            stack=stack,
            finish_comment=agent_comment(task.id, secret_values(settings)),
            branch=branch,
            run_dir=RunDirectory(self.settings.data_dir, task.id).path,
            round_tools=found is not None,
        )
        for note in built.notes:
            log.info("task %s: %s", task.id, note)
        conflicts: tuple[str, ...] = ()
        if found is not None and found.kind is RoundKind.BASE:
            try:  # the base comes in before the agent plans: it resolves what is left
                conflicts = tuple(await built.workspace.merge_base())
            except WorkspaceError as exc:
                return merge_failed(exc, base_branch)
        return TaskContext(
            task=task,
            issue=issue,
            settings=settings,
            store=self.store,
            forge=forge,
            llm=taken.llm if taken is not None and taken.llm is not None else self.llm(),
            tools=built.registry,
            emit=reporter.handle,
            data_dir=self.settings.data_dir,
            workspace=built.workspace.path,
            built=built,
            planning=planning,
            conflicts=conflicts,
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
        remove_tree(path, ignore_errors=True)
