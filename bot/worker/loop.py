"""The worker: dispatch inbox events, lease tasks, run them, checkpoint, recover.

One dispatcher loop, ``worker.max_workers`` task slots and a maintenance loop run
as asyncio tasks. A slot leases one task at a time and renews the lease while the
coordinator runs; if the process dies, the lease expires and ``requeue_expired``
(at start-up and periodically) gives the task to the next worker, which resumes
from the task's last checkpoint.

This module holds the loops, leasing and lease renewal. What one run does and how
its outcome is stored is bot/worker/run.py; the periodic maintenance is
bot/worker/maintenance.py; the pure decisions are bot/worker/outcomes.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable

from bot import metrics, offload
from bot.comments.replies import Replier
from bot.config import Settings
from bot.progress import RunProgress, awaited_by, describe_stall, watch
from bot.run_events import Outcome, PauseReason
from bot.runtime import Runtime
from bot.storage.base import StoreError, Task, TaskState
from bot.storage.retry import PersistenceFailed
from bot.worker.aftercare import Aftercare
from bot.worker.dispatcher import Dispatcher, give_back
from bot.worker.hooks import TaskHook
from bot.worker.maintenance import Maintenance
from bot.worker.operator import pause_all, read_switch
from bot.worker.outcomes import stalled
from bot.worker.run import Coordinator, TaskRunner, default_coordinator

log = logging.getLogger("bot.worker")

EVENT_LEASE_SECONDS = 600.0  # longer than any forge wait an event's handling may sit out
STORE_HALT = "the bot (its store failed every retry)"  # who set that emergency stop


class Worker:
    def __init__(
        self,
        runtime: Runtime,
        *,
        coordinator_factory: Callable[[], Coordinator] = default_coordinator,
        owner: str | None = None,
        hook: TaskHook | None = None,
    ) -> None:
        # The worker's one look at the whole runtime: each part below gets what it uses.
        self.runtime = runtime
        self.store = store = runtime.store
        settings, forges = runtime.current_settings, runtime.forge
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.replier = Replier(settings, forges)
        self._loops: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self.aftercare = Aftercare(
            store, settings=settings, forges=forges, clock=self._now, wake=self.poke
        )
        self.dispatcher = Dispatcher(
            store, settings=settings, forges=forges, replier=self.replier, aftercare=self.aftercare
        )
        self._running: dict[str, RunProgress] = {}
        self._runner = TaskRunner(
            store,
            settings=settings,
            forges=forges,
            llm=lambda: runtime.llm,  # the model in place when a run starts
            user_config=runtime.user_config,
            owner=self.owner,
            coordinator_factory=coordinator_factory,
            clock=self._now,
            wake=self.poke,
            hook=hook,
        )
        self._hook = hook
        self._maintenance = Maintenance(
            store,
            settings=settings,
            forges=forges,
            llm_health=runtime.llm_health,
            clock=self._now,
            wake=self.poke,
            aftercare=self.aftercare,
        )
        # The store failed every retry: no task is leased until the emergency stop is set
        # in the store (``halt``), with the tasks this worker paused for it.
        self._halted: str | None = None
        self._halted_tasks: list[str] = []

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
        probe = self._maintenance.say_llm_health()
        self._loops.append(asyncio.create_task(probe, name="llm-probe"))

    async def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        for loop in self._loops:
            loop.cancel()
        for loop in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        self._loops.clear()

    def free_slots(self) -> int:
        """This worker's slots that run no task now."""
        return max(0, self.settings.worker.max_workers - len(self._running))

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
                task = await self.lease_next()
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

    async def lease_next(self) -> Task | None:
        """The next queued task, leased to this worker; none while the emergency stop
        (``bot pause-all``, or this worker's own after its store kept failing) is set:
        queued tasks wait, events are still received."""
        if self._halted is not None or (await read_switch(self.store)).paused:
            return None
        return await self.store.lease_task(self.owner, self.settings.worker.lease_seconds)

    async def dispatch_once(self) -> bool:
        # The lease outlasts the longest forge wait (rate limits are waited out inline).
        item = await self.store.lease_event(self.owner, EVENT_LEASE_SECONDS)
        if item is None:
            return False
        try:
            await self.dispatcher.handle(item)
        except Exception as exc:
            log.exception("event %s could not be handled", item.id)
            await give_back(self.store, item, exc)
        self._wake.set()
        return True

    async def maintain(self) -> None:
        """Re-queue expired leases and waiting tasks whose time has come; prune old records.
        After the store kept failing, first set the emergency stop in it once it answers."""
        if self._halted is not None:
            await self._keep_halt()
        await self._maintenance.run()

    def halt(self, reason: str, task_id: str) -> None:
        """The store failed every retry (specification 003, 6: retried, then the emergency
        stop): this worker leases no more tasks, and sets the stop in the store when it
        answers again, so every worker stops until ``bot resume-all``."""
        if self._halted is None:
            log.error(
                "emergency stop: %s; no task runs until the store works again and an "
                "operator runs `bot resume-all` (check the database with `bot doctor`)",
                reason,
            )
        self._halted = reason
        self._halted_tasks.append(task_id)
        metrics.PAUSED_ALL.set(1)

    async def _keep_halt(self) -> None:
        try:
            switch = await pause_all(self.store, by=STORE_HALT, paused_already=self._halted_tasks)
        except StoreError as exc:
            log.warning("emergency stop: the store still fails: %s", exc)
            return
        log.error("emergency stop set in the store (%d tasks paused)", len(switch.tasks))
        self._halted = None
        self._halted_tasks = []

    async def run_task(self, task: Task) -> Outcome:
        """Run one leased task to its next resting state.

        If the lease is lost (another worker took the task after this one stopped
        renewing in time), the run is cancelled at once and nothing more is stored.
        If the run stops moving for ``worker.stall_seconds`` (the watchdog), it is
        cancelled, logged with what it awaited, and given back to the queue."""
        progress = RunProgress()
        context = watch(progress)
        context.run(offload.join_lane, task.id)  # its offloaded calls queue as its own
        work = asyncio.create_task(self._runner.run(task), context=context)
        self._running[task.id] = progress
        renewer = asyncio.create_task(self._renew(task.id, work))
        watchdog = asyncio.create_task(self._watch(task, work, progress))
        stalled_run = False
        try:
            outcome = await work
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
            if watchdog.done() and not watchdog.cancelled():
                outcome, stalled_run = watchdog.result(), True
            elif renewer.done():
                log.error("task %s: lease lost; this worker stopped working on it", task.id)
                return Outcome(TaskState.RUNNING, reason="lease lost")
            else:
                raise
        finally:
            self._running.pop(task.id, None)
            for helper in (renewer, watchdog):
                helper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await helper
        try:
            stored = await self._runner.settle(task.id, outcome)
        except PersistenceFailed as exc:  # the outcome cannot be kept either
            self.halt(str(exc), task.id)
            return outcome
        if outcome.pause is PauseReason.STORE:
            self.halt(f"task {task.id}: the store failed every retry", task.id)
        if stalled_run and outcome.state is TaskState.FAILED:  # the run could not say so
            await self._runner.report_late(task, outcome)
        if stored:  # else the worker that holds the task now follows it up
            await self._after(task, outcome)
        return outcome

    async def _after(self, task: Task, outcome: Outcome) -> None:
        """What follows a task on the bot's change request (its watch, a round's record
        and answers), or the hook's task's own sequel; a failure there is logged, never
        the task's."""
        try:
            if self._hook is not None and self._hook.claims(task):
                await self._hook.ended(task, outcome)
                return
            await self.aftercare.task_ended(task, outcome)
        except Exception:
            log.exception("task %s: what follows it on its change request failed", task.id)

    def stuck(self) -> list[str]:
        """The runs that have made no progress for longer than the bound, described."""
        bound = self.settings.worker.stall_seconds
        return [
            describe_stall(task_id, progress)
            for task_id, progress in list(self._running.items())
            if progress.idle_for() > bound
        ]

    async def _watch(
        self, task: Task, work: asyncio.Task[Outcome], progress: RunProgress
    ) -> Outcome:
        """Wait until the run stalls; then cancel it and say what it was waiting for."""
        while True:
            bound = self.settings.worker.stall_seconds
            await asyncio.sleep(min(max(bound / 4, 0.05), 10.0))
            if progress.idle_for() > bound:
                break
        log.error(
            "task %s: stalled: %s; its run is cancelled and the task retried",
            task.id,
            describe_stall(task.id, progress, awaiting=awaited_by(work)),
        )
        work.cancel()
        return stalled(
            progress.awaiting() or awaited_by(work)[-1:], attempts=task.attempts, now=self._now()
        )

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
