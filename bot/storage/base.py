"""The storage protocol: deliveries, the event inbox, tasks, leases, checkpoints.

Two implementations share it: ``sqlite.py`` (the embedded default, one WAL file
under ``data_dir``) and ``postgres.py`` (scale-out: several web and worker
replicas share one queue). Every method is one transaction.

Data path: the web handler calls ``record_delivery`` (one inbox row, whose unique
delivery key makes a redelivery a no-op). A worker's dispatcher leases
inbox events, decides, and calls ``create_task`` or ``add_message`` with the
event id, which completes the event in the same transaction as the task or
message it produced. Worker slots lease tasks.

The protocol comes in parts (``Inbox``, ``Marks``, ``Tasks``, ``Checkpoints``,
``Messages``, ``CommentIds``, ``CachedPlans``, ``Dialects``, ``Lifecycle``); ``Store`` is
all of them. A module is handed the parts it uses, so its signature says what it may
touch. What the parts take and give (``Task``, ``InboxEvent``, ...) is ``records``'.
"""

from __future__ import annotations

from typing import Any, Protocol

from bot.events import TaskRequest
from bot.events import TaskState as TaskState  # re-exported: the store keeps it
from bot.storage.records import (  # re-exported: what the store's methods take and give
    ACTIVE_STATES as ACTIVE_STATES,
)
from bot.storage.records import InboxEvent as InboxEvent
from bot.storage.records import StoreError as StoreError
from bot.storage.records import Task as Task
from bot.storage.records import TaskMessage as TaskMessage
from bot.storage.records import Watch as Watch


class Watches(Protocol):
    """The bot's change requests after they were opened."""

    async def add_watch(self, watch: Watch) -> bool:
        """Start watching ``watch.key`` (False, and nothing written, when it is watched)."""
        ...

    async def get_watch(self, key: str) -> Watch | None: ...

    async def find_watch(self, repo_key: str, branch: str) -> Watch | None:
        """The open watch of the change request from ``branch`` in that repository."""
        ...

    async def save_watch(
        self, key: str, data: dict[str, Any], *, version: int, is_open: bool | None = None
    ) -> bool:
        """Replace the record (and, when given, whether it is open) if the watch is still
        at ``version``; False when another save came first (read it again and retry)."""
        ...

    async def set_autofix(self, key: str, enabled: bool) -> bool:
        """``/agent autofix on|off``; False for an unknown key."""
        ...

    async def open_watches(self, *, limit: int = 500) -> list[Watch]:
        """Open watches, the least recently updated first (what the CI poll walks)."""
        ...


class Lifecycle(Protocol):
    """Opening, closing and probing the store."""

    async def open(self) -> None:
        """Create the schema when missing. Idempotent."""
        ...

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raise ``StoreError`` unless the store accepts a write now (for /readyz)."""
        ...


class Inbox(Protocol):
    """Webhook deliveries and the inbox of events the dispatcher leases."""

    async def record_delivery(
        self, delivery_key: str, forge: str, payload: dict[str, Any] | None
    ) -> bool:
        """Record a delivery and, when ``payload`` is given, queue it in the inbox.

        Returns False (and writes nothing) when the key was recorded before, also when
        two deliveries of the same key race each other.
        """
        ...

    async def delivery_known(self, delivery_key: str) -> bool:
        """Whether a delivery of that key was recorded (and not yet pruned)."""
        ...

    async def lease_event(self, owner: str, lease_seconds: float) -> InboxEvent | None: ...

    async def finish_event(self, event_id: int, *, error: str | None = None) -> None:
        """Mark an inbox event handled (``error`` keeps the reason for the record)."""
        ...

    async def retry_event(self, event_id: int, *, error: str, delay_seconds: float) -> None:
        """Give a leased event back, to be leased again after ``delay_seconds``."""
        ...

    async def pending_events(self) -> int: ...

    async def prune(self, *, older_than: float) -> int:
        """Delete handled inbox events and marks dated before ``older_than`` (epoch
        seconds): the end of the redelivery window. Returns how many rows went; pending
        and leased events are kept."""
        ...


class Marks(Protocol):
    """Marks: things done once (a comment handled, a denial said, a redelivery asked)."""

    async def claim(self, key: str, *, owner: str, window: float | None = None) -> bool:
        """Take the mark ``key`` for ``owner``. True when it was free, is ``owner``'s
        already (a retry of the same work), or (with ``window``) was taken more than
        ``window`` seconds ago, when it becomes ``owner``'s from now; False otherwise."""
        ...

    async def get_mark(self, key: str) -> tuple[str, float] | None:
        """The owner and the date (epoch seconds) of the mark ``key``, if any."""
        ...

    async def put_mark(self, key: str, owner: str) -> None:
        """Set the mark ``key`` to ``owner``, dated now."""
        ...


class Dialects(Protocol):
    """The LLM endpoint's structured-output dialect (``bot.llm.dialect.DialectStore``)."""

    async def get_llm_dialect(self, endpoint: str, model: str) -> tuple[str, str, float] | None:
        """(dialect, server kind, found at) kept for ``endpoint`` and ``model``, if any."""
        ...

    async def put_llm_dialect(
        self, endpoint: str, model: str, *, dialect: str, server: str
    ) -> None:
        """Keep the dialect that works at ``endpoint`` for ``model`` (replacing any)."""
        ...


class Tasks(Protocol):
    """Tasks: the queue, leases and states."""

    async def create_task(
        self, request: TaskRequest, *, event_id: int | None = None
    ) -> tuple[Task, bool]:
        """Queue a task unless the issue has an active one.

        Returns ``(task, True)`` for a new task, ``(active_task, False)`` otherwise. When
        ``event_id`` is given the inbox event is finished in the same transaction.
        """
        ...

    async def get_task(self, task_id: str) -> Task | None: ...

    async def active_task_for(self, issue_key: str) -> Task | None: ...

    async def latest_task_for(self, issue_key: str) -> Task | None: ...

    async def list_tasks(
        self, *, states: frozenset[TaskState] | None = None, limit: int = 100
    ) -> list[Task]:
        """Newest first."""
        ...

    async def count_tasks(self, *, states: frozenset[TaskState] | None = None) -> int: ...

    async def lease_task(self, owner: str, lease_seconds: float) -> Task | None:
        """Take the oldest queued task whose ``wake_at`` has passed; state becomes running."""
        ...

    async def renew_lease(self, task_id: str, owner: str, lease_seconds: float) -> bool:
        """Extend the lease; False when ``owner`` no longer holds it."""
        ...

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
        """Move a task to ``state``; ``release`` drops the lease. ``phase`` None keeps the
        phase; ``error`` and ``wake_at`` are set as given (None clears them).

        With ``expect_owner`` or ``expect_state`` the change is made only while the task
        still has that lease owner or state (False when it did not happen); without
        them an unknown task raises ``StoreError``.
        """
        ...

    async def requeue_expired(self) -> int:
        """Running tasks whose lease expired go back to queued. Returns how many."""
        ...

    async def due_tasks(self, now: float) -> list[Task]:
        """Waiting or paused tasks whose ``wake_at`` is at or before ``now``."""
        ...


class Checkpoints(Protocol):
    """A task's checkpoint: the run's state after its last action."""

    async def save_checkpoint(self, task_id: str, data: dict[str, Any]) -> None: ...

    async def load_checkpoint(self, task_id: str) -> dict[str, Any] | None: ...


class Messages(Protocol):
    """What people and operators said to a task (feedback, commands), in order."""

    async def add_message(
        self,
        task_id: str,
        kind: str,
        payload: dict[str, Any],
        *,
        event_id: int | None = None,
        requeue: bool = False,
    ) -> int:
        """Append a message (feedback, command) for a task; returns its sequence number.

        ``event_id`` finishes that inbox event in the same transaction; ``requeue`` moves
        a waiting or paused task back to queued in it too.
        """
        ...

    async def messages_after(self, task_id: str, seq: int) -> list[TaskMessage]: ...


class CommentIds(Protocol):
    """The ids of the comments a task posted, by marker (edited in place, never twice)."""

    async def get_comment_id(self, task_id: str, marker: str) -> int | None: ...

    async def put_comment_id(self, task_id: str, marker: str, comment_id: int) -> None: ...


class CachedPlans(Protocol):
    """The plan cache's entries (``bot.agent.cache``)."""

    async def cache_get(self, key: str, now: float) -> dict[str, Any] | None: ...

    async def cache_put(
        self,
        key: str,
        *,
        repo_key: str,
        text: str,
        value: dict[str, Any],
        expires_at: float,
    ) -> None: ...

    async def cache_candidates(
        self, repo_key: str, now: float, limit: int = 50
    ) -> list[tuple[str, str, dict[str, Any]]]:
        """Unexpired entries of one repository: (key, normalised text, value)."""
        ...


class Store(
    Lifecycle, Inbox, Marks, Dialects, Tasks, Checkpoints, Messages, CommentIds, CachedPlans,
    Watches, Protocol,
):  # fmt: skip
    """Durable state. All methods are coroutines; each is one transaction.

    The parts above are what its users need: each module names the parts it uses (the
    dispatcher the inbox, tasks, messages and marks; the reporter the comment ids; the
    aftercare the watches; ...), and the SQLite and PostgreSQL stores have them all."""
