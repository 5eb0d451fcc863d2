"""The worker's periodic maintenance: re-queue tasks whose lease expired, wake waiting
tasks whose time has come (probing the LLM first, with the small structured request a
task would make, for tasks paused because it was down), ask the forge again for webhook
deliveries missed while the bot was down (``redelivery.py``), prune handled webhook
events and the dedup window after 14 days, and delete the run directories of tasks that
ended more than ``storage.runs_retention_days`` ago."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from bot import offload
from bot.config import CurrentSettings
from bot.forges.base import ForgeLookup
from bot.llm.base import HealthReport
from bot.storage.base import ACTIVE_STATES, Inbox, Marks, Task, Tasks, TaskState
from bot.storage.runs import old_runs, remove_runs
from bot.worker.outcomes import LLM_UNAVAILABLE, waits_for_llm
from bot.worker.redelivery import Redeliveries

log = logging.getLogger("bot.worker")

RETENTION_SECONDS = 14 * 86400  # handled webhook events and the dedup window
PRUNE_INTERVAL_SECONDS = 3600.0


class MaintenanceStore(Tasks, Inbox, Marks, Protocol):
    """The tasks it wakes and re-queues, the inbox it prunes (and asks about missed
    deliveries), the marks of redeliveries."""


class Maintenance:
    """One worker's maintenance pass; ``wake`` tells its slots there is work;
    ``llm_health`` is the LLM endpoint's (cached) health."""

    def __init__(
        self,
        store: MaintenanceStore,
        *,
        settings: CurrentSettings,
        forges: ForgeLookup,
        llm_health: Callable[[], Awaitable[HealthReport]],
        clock: Callable[[], float],
        wake: Callable[[], None],
    ) -> None:
        self.store = store
        self.settings = settings
        self.llm_health = llm_health
        self._clock = clock
        self._wake = wake
        self._next_prune = 0.0
        self.redeliveries = Redeliveries(store, settings=settings, forges=forges, clock=clock)

    async def say_llm_health(self) -> None:
        """Say once at start-up whether the LLM endpoint answers, with setup steps if not."""
        try:
            report = await self.llm_health()
        except Exception as exc:  # a probe must never take the bot down
            log.warning("LLM health probe failed: %s", exc)
            return
        if report.ready:
            log.info(
                "LLM endpoint %s answers (%s, model %s, dialect %s, %s ms)",
                report.base_url,
                report.server or report.provider,
                report.model,
                report.dialect or "-",
                report.latency_ms if report.latency_ms is not None else "-",
            )
            return
        steps = "; ".join(report.setup_steps)
        problem = report.error or f"model {report.model} is not served"
        log.warning(
            "LLM endpoint %s: %s. Tasks wait until it answers. %s", report.base_url, problem, steps
        )

    async def run(self) -> None:
        """Re-queue expired leases and waiting tasks whose time has come; ask for missed
        deliveries; prune old records."""
        await self.store.requeue_expired()
        await self._wake_due()
        await self._prune_if_due()
        await self.redeliveries.run_if_due()

    async def _wake_due(self) -> None:
        due = await self.store.due_tasks(self._clock())
        llm_ok: bool | None = None  # probed at most once a pass, and only if needed
        for task in due:
            if waits_for_llm(task):
                if llm_ok is None:
                    llm_ok = (await self.llm_health()).ready
                if not llm_ok:
                    await self._pause_again(task)
                    continue
            woke = await self.store.set_state(
                task.id, TaskState.QUEUED, error=task.error, expect_state=task.state
            )
            if woke:
                self._wake()

    async def _pause_again(self, task: Task) -> None:
        """The LLM is still down: look at the task again after the next health interval."""
        retry = self._clock() + self.settings().llm.health_interval
        await self.store.set_state(
            task.id,
            TaskState.PAUSED,
            error=LLM_UNAVAILABLE,
            wake_at=retry,
            expect_state=task.state,
        )

    async def _prune_if_due(self) -> None:
        if self._clock() >= self._next_prune:
            self._next_prune = self._clock() + PRUNE_INTERVAL_SECONDS
            await self.store.prune(older_than=self._clock() - RETENTION_SECONDS)
            await self.prune_runs()

    async def prune_runs(self) -> list[str]:
        """Delete the run directories untouched for ``storage.runs_retention_days`` whose
        task has ended (or is unknown to the store); the ids deleted. The folders are
        read and deleted in a worker process (``runs/`` may hold thousands)."""
        storage = self.settings().storage
        if storage.runs_retention_days <= 0:
            return []
        before = self._clock() - storage.runs_retention_days * 86400
        stale = await offload.run(old_runs, storage.data_dir, before=before)
        ended = []
        for task_id in stale:
            task = await self.store.get_task(task_id)
            if task is None or task.state not in ACTIVE_STATES:
                ended.append(task_id)
        if not ended:
            return []
        removed = await offload.run(remove_runs, storage.data_dir, ended)
        log.info("deleted %d run directories older than %g days", len(removed),
                 storage.runs_retention_days)  # fmt: skip
        return removed
