"""The worker: dispatch inbox events, lease tasks, run them, checkpoint, recover.

One dispatcher loop, ``worker.max_workers`` task slots and a maintenance loop run
as asyncio tasks. A slot leases one task at a time and renews the lease while the
coordinator runs; if the process dies, the lease expires and ``requeue_expired``
(at start-up and periodically) gives the task to the next worker, which resumes
from the task's last checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from bot import metrics
from bot.agent.context import Outcome, TaskContext
from bot.agent.state import consumed_message_seq
from bot.comments.replies import Replier
from bot.comments.reporter import IssueReporter
from bot.config import Settings
from bot.dispatcher import MAX_EVENT_ATTEMPTS, Dispatcher
from bot.events import TaskMode
from bot.forges.base import AccessDenied, Forge, ForgeError, NotFound
from bot.storage.base import ACTIVE_STATES, StoreError, Task, TaskState
from bot.tools.factory import build_tools
from bot.tools.repo_config import RepoConfigError, load_repo_config

if TYPE_CHECKING:
    from bot.runtime import Runtime

log = logging.getLogger("bot.worker")

EVENT_LEASE_SECONDS = 600.0  # longer than any forge wait an event's handling may sit out
MAX_TASK_ATTEMPTS = 6
RETENTION_SECONDS = 14 * 86400  # handled webhook events and the dedup window
WAITING_FOR_PEOPLE = frozenset(
    {TaskState.AWAITING_INPUT, TaskState.AWAITING_APPROVAL, TaskState.PAUSED}
)


class Coordinator(Protocol):
    async def run(self, ctx: TaskContext) -> Outcome: ...


def _default_coordinator() -> Coordinator:
    from bot.agent.coordinator import ExecutionCoordinator

    return ExecutionCoordinator()


class Worker:
    def __init__(
        self,
        runtime: Runtime,
        *,
        coordinator_factory: Callable[[], Coordinator] = _default_coordinator,
        owner: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.store = runtime.store
        self.coordinator_factory = coordinator_factory
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.replier = Replier(runtime)
        self.dispatcher = Dispatcher(runtime, self.replier)
        self._loops: list[asyncio.Task[None]] = []
        self._running: dict[str, asyncio.Task[None]] = {}
        self._stopping = asyncio.Event()
        self._next_prune = 0.0
        self._wake = asyncio.Event()

    @property
    def settings(self) -> Settings:
        """The runtime's current settings (they may be reloaded while running)."""
        return self.runtime.settings

    def _now(self) -> float:
        return self.runtime.clock() if self.runtime.clock else time.time()

    async def start(self) -> None:
        recovered = await self.store.requeue_expired()
        if recovered:
            log.warning("re-queued %d task(s) whose worker stopped without finishing", recovered)
        self._loops.append(asyncio.create_task(self._dispatch_loop(), name="dispatcher"))
        for slot in range(self.settings.worker.max_workers):
            self._loops.append(asyncio.create_task(self._slot_loop(), name=f"slot-{slot}"))
        self._loops.append(asyncio.create_task(self._maintenance_loop(), name="maintenance"))

    async def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        for loop in self._loops:
            loop.cancel()
        for loop in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        self._loops.clear()

    def poke(self) -> None:
        """Look for work now (the web role in the same process calls this)."""
        self._wake.set()

    async def _idle(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), self.settings.worker.poll_interval)
        self._wake.clear()

    # --- loops --------------------------------------------------------------------------------

    async def _dispatch_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                handled = await self.dispatch_once()
            except Exception:  # a loop that dies silently would strand every webhook
                log.exception("dispatcher: unexpected error; continuing")
                handled = False
            if not handled:
                await self._idle()

    async def _slot_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                task = await self.store.lease_task(self.owner, self.settings.worker.lease_seconds)
                if task is not None:
                    await self.run_task(task)
            except Exception:  # the lease expires and another slot takes the task again
                log.exception("worker slot: unexpected error; continuing")
                task = None
            if task is None:
                await self._idle()

    async def _maintenance_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.maintain()
            except Exception:
                log.exception("maintenance: unexpected error; continuing")
            await asyncio.sleep(max(self.settings.worker.poll_interval * 10, 1.0))

    # --- units of work (tests call these directly) -----------------------------------------------

    async def dispatch_once(self) -> bool:
        # The lease outlasts the longest forge wait (rate limits are waited out inline).
        item = await self.store.lease_event(self.owner, EVENT_LEASE_SECONDS)
        if item is None:
            return False
        try:
            await self.dispatcher.handle(item)
        except Exception as exc:
            log.exception("event %s could not be handled", item.id)
            if item.attempts >= MAX_EVENT_ATTEMPTS:
                await self.store.finish_event(item.id, error=f"gave up: {exc!r}")
            else:
                delay = min(2.0**item.attempts, 300.0)
                await self.store.retry_event(item.id, error=repr(exc), delay_seconds=delay)
        self._wake.set()
        return True

    async def maintain(self) -> None:
        """Re-queue expired leases and waiting tasks whose time has come; prune old records."""
        await self.store.requeue_expired()
        due = await self.store.due_tasks(self._now())
        llm_ok: bool | None = None
        for task in due:
            if task.state is TaskState.PAUSED and task.error == "llm_unavailable":
                if llm_ok is None:
                    llm_ok = (await self.runtime.llm_health()).reachable
                if not llm_ok:
                    retry = self._now() + self.settings.llm.health_interval
                    await self.store.set_state(
                        task.id,
                        TaskState.PAUSED,
                        error="llm_unavailable",
                        wake_at=retry,
                        expect_state=task.state,
                    )
                    continue
            woke = await self.store.set_state(
                task.id, TaskState.QUEUED, error=task.error, expect_state=task.state
            )
            if woke:
                self._wake.set()
        if self._now() >= self._next_prune:
            self._next_prune = self._now() + 3600
            await self.store.prune(older_than=self._now() - RETENTION_SECONDS)

    async def run_task(self, task: Task) -> Outcome:
        """Run one leased task to its next resting state.

        If the lease is lost (another worker took the task after this one stopped
        renewing in time), the run is cancelled at once and nothing more is stored."""
        work = asyncio.create_task(self._run(task))
        renewer = asyncio.create_task(self._renew(task.id, work))
        try:
            outcome = await work
        except asyncio.CancelledError:
            if not renewer.done() or asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
            log.error("task %s: lease lost; this worker stopped working on it", task.id)
            return Outcome(TaskState.RUNNING, reason="lease lost")
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
        stored = await self.store.set_state(
            task.id,
            outcome.state,
            error=outcome.reason or None,
            wake_at=outcome.wake_at,
            expect_owner=self.owner,
        )
        if not stored:
            log.error("task %s: lease lost before its outcome could be stored", task.id)
        else:
            await self._requeue_if_answered(task.id, outcome)
        if outcome.state not in ACTIVE_STATES:
            metrics.TASKS.labels(outcome.state.value).inc()
        return outcome

    async def _requeue_if_answered(self, task_id: str, outcome: Outcome) -> None:
        """A reply that arrived while the task was still running (after its last look
        at its messages, before its waiting state was stored) did not re-queue it: the
        dispatcher only re-queues tasks already waiting. Re-queue it now, if its
        checkpoint has not seen every message."""
        if outcome.state not in WAITING_FOR_PEOPLE or outcome.reason == "llm_unavailable":
            return
        seen = consumed_message_seq(await self.store.load_checkpoint(task_id))
        if seen is None or not await self.store.messages_after(task_id, seen):
            return
        requeued = await self.store.set_state(
            task_id, TaskState.QUEUED, error=outcome.reason or None, expect_state=outcome.state
        )
        if requeued:
            log.info("task %s: a reply came in while it ran; re-queued", task_id)
            self._wake.set()

    async def _run(self, task: Task) -> Outcome:
        issue = task.request.issue
        forge = self.runtime.forge(issue.repo.forge)
        if forge is None:
            return Outcome(TaskState.FAILED, reason=f"{issue.repo.forge.value} is not configured")
        reporter = IssueReporter(self.runtime, task, forge)
        try:
            return await self._run_reported(task, forge, reporter)
        finally:  # also on cancellation: no coalesced status edit may land afterwards
            await reporter.aclose()

    async def _run_reported(self, task: Task, forge: Forge, reporter: IssueReporter) -> Outcome:
        try:
            await reporter.begin()
            async with contextlib.AsyncExitStack() as stack:
                ctx = await self._context(task, forge, reporter, stack)
                if isinstance(ctx, Outcome):
                    outcome = ctx
                else:
                    outcome = await self.coordinator_factory().run(ctx)
        except (NotFound, AccessDenied) as exc:
            log.warning("task %s: the forge refuses: %s", task.id, exc)
            return Outcome(TaskState.FAILED, reason=f"the forge refused: {exc}")
        except ForgeError as exc:
            if task.attempts >= MAX_TASK_ATTEMPTS:
                return Outcome(TaskState.FAILED, reason=f"forge error, gave up: {exc}")
            log.warning("task %s: forge error, will retry: %s", task.id, exc)
            wait = min(30.0 * 2 ** (task.attempts - 1), 900.0)
            return Outcome(
                TaskState.QUEUED, reason=f"forge error: {exc}", wake_at=self._now() + wait
            )
        except Exception as exc:
            log.exception("task %s crashed", task.id)
            outcome = Outcome(TaskState.FAILED, reason=f"internal error: {type(exc).__name__}")
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
            return Outcome(
                TaskState.FAILED,
                reason="planning is switched off on this bot (planning.enabled: false, or "
                "PLANNING_ENABLED=false); its administrator has to switch it on",
            )
        info = await forge.get_repo_info(issue.repo)
        try:
            repo_config = await load_repo_config(forge, issue.repo, info.default_branch)
        except RepoConfigError as exc:
            return Outcome(
                TaskState.NEEDS_HUMAN,
                reason=f"the repository's .agent.yaml is invalid: {exc}",
                summary={"recommendations": ["fix .agent.yaml on the default branch"]},
            )
        branch = None
        if task.request.mode is TaskMode.FOLLOW_UP and issue.head_branch:
            branch = issue.head_branch
        built = await build_tools(
            settings=self.settings,
            forge=forge,
            issue=issue,
            task_id=task.id,
            base_branch=info.default_branch,
            repo_config=repo_config,
            stack=stack,
            branch=branch,
        )
        for note in built.notes:
            log.info("task %s: %s", task.id, note)
        return TaskContext(
            task=task,
            issue=issue,
            settings=self.settings,
            store=self.store,
            forge=forge,
            llm=self.runtime.llm,
            tools=built.registry,
            emit=reporter.handle,
            data_dir=self.settings.data_dir,
            workspace=built.workspace.path,
            built=built,
        )

    def _clean_workspace(self, task_id: str) -> None:
        path = self.settings.data_dir / "workspaces" / task_id
        shutil.rmtree(path, ignore_errors=True)

    async def _renew(self, task_id: str, work: asyncio.Task[Outcome]) -> None:
        lease = self.settings.worker.lease_seconds
        while True:
            await asyncio.sleep(lease / 3)
            try:
                kept = await self.store.renew_lease(task_id, self.owner, lease)
            except StoreError as exc:
                log.error("task %s: could not renew lease: %s", task_id, exc)
                continue
            if not kept:
                work.cancel()  # another worker owns the task now: stop before it acts twice
                return
