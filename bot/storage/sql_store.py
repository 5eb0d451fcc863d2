"""The ``Store`` protocol on top of the shared transaction scripts.

``SqliteStore`` and ``PostgresStore`` differ only in how they open, close and run a
script in one transaction (``_run``); every method of the protocol lives here once.
Timestamps come from the injected ``clock`` (epoch seconds), task ids from uuid4.
"""

from __future__ import annotations

import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

from bot.events import TaskRequest
from bot.storage import mark_scripts, scripts, task_scripts, watch_scripts
from bot.storage.base import InboxEvent, Task, TaskMessage, TaskState, Watch
from bot.storage.scripts import Script

T = TypeVar("T")
Clock = Callable[[], float]


def _positive(name: str, value: float) -> float:
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return value


class SqlStore(ABC):
    def __init__(self, *, clock: Clock = time.time) -> None:
        self._clock = clock

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def _run(self, script: Script[T], *, write: bool) -> T:
        """Run ``script`` in one transaction (``write``: it may write)."""

    async def ping(self) -> None:
        await self._run(scripts.ping(self._clock()), write=True)

    # --- deliveries and the inbox -------------------------------------------------------------

    async def record_delivery(
        self, delivery_key: str, forge: str, payload: dict[str, Any] | None
    ) -> bool:
        script = scripts.record_delivery(delivery_key, forge, payload, self._clock())
        return await self._run(script, write=True)

    async def delivery_known(self, delivery_key: str) -> bool:
        return await self._run(scripts.delivery_known(delivery_key), write=False)

    async def lease_event(self, owner: str, lease_seconds: float) -> InboxEvent | None:
        now = self._clock()
        expires = now + _positive("lease_seconds", lease_seconds)
        return await self._run(scripts.lease_event(owner, expires, now), write=True)

    async def finish_event(self, event_id: int, *, error: str | None = None) -> None:
        await self._run(scripts.finish_event(event_id, error), write=True)

    async def retry_event(self, event_id: int, *, error: str, delay_seconds: float) -> None:
        available_at = self._clock() + max(0.0, delay_seconds)
        await self._run(scripts.retry_event(event_id, error, available_at), write=True)

    async def pending_events(self) -> int:
        return await self._run(scripts.pending_events(), write=False)

    async def prune(self, *, older_than: float) -> int:
        marks = await self._run(mark_scripts.prune_marks(older_than), write=True)
        return marks + await self._run(scripts.prune_deliveries(older_than), write=True)

    # --- marks ---------------------------------------------------------------------------------

    async def claim(self, key: str, *, owner: str, window: float | None = None) -> bool:
        now = self._clock()
        since = None if window is None else now - window
        return await self._run(mark_scripts.claim(key, owner, since, now), write=True)

    async def get_mark(self, key: str) -> tuple[str, float] | None:
        return await self._run(mark_scripts.get_mark(key), write=False)

    async def put_mark(self, key: str, owner: str) -> None:
        await self._run(mark_scripts.put_mark(key, owner, self._clock()), write=True)

    # --- the LLM endpoint's dialect -------------------------------------------------------------

    async def get_llm_dialect(self, endpoint: str, model: str) -> tuple[str, str, float] | None:
        return await self._run(mark_scripts.get_llm_dialect(endpoint, model), write=False)

    async def put_llm_dialect(
        self, endpoint: str, model: str, *, dialect: str, server: str
    ) -> None:
        script = mark_scripts.put_llm_dialect(endpoint, model, dialect, server, self._clock())
        await self._run(script, write=True)

    # --- tasks ---------------------------------------------------------------------------------

    async def create_task(
        self, request: TaskRequest, *, event_id: int | None = None
    ) -> tuple[Task, bool]:
        task_id = str(uuid.uuid4())
        script = task_scripts.create_task(request, task_id, event_id, self._clock())
        return await self._run(script, write=True)

    async def get_task(self, task_id: str) -> Task | None:
        return await self._run(task_scripts.get_task(task_id), write=False)

    async def active_task_for(self, issue_key: str) -> Task | None:
        return await self._run(task_scripts.active_task_for(issue_key), write=False)

    async def latest_task_for(self, issue_key: str) -> Task | None:
        return await self._run(task_scripts.latest_task_for(issue_key), write=False)

    async def list_tasks(
        self, *, states: frozenset[TaskState] | None = None, limit: int = 100
    ) -> list[Task]:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        return await self._run(task_scripts.list_tasks(states, limit), write=False)

    async def count_tasks(self, *, states: frozenset[TaskState] | None = None) -> int:
        return await self._run(task_scripts.count_tasks(states), write=False)

    async def lease_task(self, owner: str, lease_seconds: float) -> Task | None:
        now = self._clock()
        expires = now + _positive("lease_seconds", lease_seconds)
        return await self._run(task_scripts.lease_task(owner, expires, now), write=True)

    async def renew_lease(self, task_id: str, owner: str, lease_seconds: float) -> bool:
        expires = self._clock() + _positive("lease_seconds", lease_seconds)
        return await self._run(task_scripts.renew_lease(task_id, owner, expires), write=True)

    async def set_state(
        self,
        task_id: str,
        state: TaskState,
        *,
        phase: str | None = None,
        error: str | None = None,
        wake_at: float | None = None,
        release: bool = True,
        expect_owner: str | None = None,
        expect_state: TaskState | None = None,
    ) -> bool:
        script = task_scripts.set_state(
            task_id,
            TaskState(state),
            phase=phase,
            error=error,
            wake_at=wake_at,
            release=release,
            now=self._clock(),
            expect_owner=expect_owner,
            expect_state=expect_state,
        )
        return await self._run(script, write=True)

    async def requeue_expired(self) -> int:
        return await self._run(task_scripts.requeue_expired(self._clock()), write=True)

    async def due_tasks(self, now: float) -> list[Task]:
        return await self._run(task_scripts.due_tasks(now), write=False)

    # --- checkpoints, messages, comment ids --------------------------------------------

    async def save_checkpoint(self, task_id: str, data: dict[str, Any]) -> None:
        await self._run(scripts.save_checkpoint(task_id, data, self._clock()), write=True)

    async def load_checkpoint(self, task_id: str) -> dict[str, Any] | None:
        return await self._run(scripts.load_checkpoint(task_id), write=False)

    async def add_message(
        self,
        task_id: str,
        kind: str,
        payload: dict[str, Any],
        *,
        event_id: int | None = None,
        requeue: bool = False,
    ) -> int:
        script = scripts.add_message(
            task_id, kind, payload, event_id=event_id, requeue=requeue, now=self._clock()
        )
        return await self._run(script, write=True)

    async def messages_after(self, task_id: str, seq: int) -> list[TaskMessage]:
        return await self._run(scripts.messages_after(task_id, seq), write=False)

    async def get_comment_id(self, task_id: str, marker: str) -> int | None:
        return await self._run(scripts.get_comment_id(task_id, marker), write=False)

    async def put_comment_id(self, task_id: str, marker: str, comment_id: int) -> None:
        await self._run(scripts.put_comment_id(task_id, marker, comment_id), write=True)

    # --- plan cache ---------------------------------------------------------------------

    async def cache_get(self, key: str, now: float) -> dict[str, Any] | None:
        return await self._run(scripts.cache_get(key, now), write=False)

    async def cache_put(
        self,
        key: str,
        *,
        repo_key: str,
        text: str,
        value: dict[str, Any],
        expires_at: float,
    ) -> None:
        script = scripts.cache_put(key, repo_key, text, value, expires_at, self._clock())
        await self._run(script, write=True)

    async def cache_candidates(
        self, repo_key: str, now: float, limit: int = 50
    ) -> list[tuple[str, str, dict[str, Any]]]:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        return await self._run(scripts.cache_candidates(repo_key, now, limit), write=False)

    # --- watches: the bot's change requests after they were opened ------------------------------

    async def add_watch(self, watch: Watch) -> bool:
        return await self._run(watch_scripts.add_watch(watch, self._clock()), write=True)

    async def get_watch(self, key: str) -> Watch | None:
        return await self._run(watch_scripts.get_watch(key), write=False)

    async def find_watch(self, repo_key: str, branch: str) -> Watch | None:
        return await self._run(watch_scripts.find_watch(repo_key, branch), write=False)

    async def save_watch(
        self, key: str, data: dict[str, Any], *, version: int, is_open: bool | None = None
    ) -> bool:
        script = watch_scripts.save_watch(key, data, version, is_open, self._clock())
        return await self._run(script, write=True)

    async def set_autofix(self, key: str, enabled: bool) -> bool:
        return await self._run(watch_scripts.set_autofix(key, enabled, self._clock()), write=True)

    async def open_watches(self, *, limit: int = 500) -> list[Watch]:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        return await self._run(watch_scripts.open_watches(limit), write=False)
