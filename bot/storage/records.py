"""What the store keeps, as the rest of the bot sees it: a task, an inbox event, a
message to a task, a watched change request; and the store's one error."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.events import IssueRef, TaskRequest, TaskState


class StoreError(Exception):
    """The store failed (could not open, write or read)."""


ACTIVE_STATES: frozenset[TaskState] = frozenset(
    {
        TaskState.QUEUED,
        TaskState.RUNNING,
        TaskState.AWAITING_INPUT,
        TaskState.AWAITING_APPROVAL,
        TaskState.PAUSED,
    }
)


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    issue_key: str
    repo_key: str
    request: TaskRequest
    state: TaskState
    phase: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    lease_owner: str | None = None
    lease_expires: float | None = None
    wake_at: float | None = None
    attempts: int = 0
    error: str | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


@dataclass(frozen=True, slots=True)
class InboxEvent:
    id: int
    delivery_key: str
    forge: str
    payload: dict[str, Any]
    received_at: float
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class TaskMessage:
    seq: int
    task_id: str
    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Watch:
    """One change request the bot opened, watched after it was opened (CI results, review
    rounds, its base). ``key`` is the change request's issue key; ``task_id`` the task that
    opened it; ``data`` the after-PR record (``bot.followup.record``); ``version`` grows
    with every save (``save_watch`` refuses a save based on an older one)."""

    key: str
    repo_key: str
    branch: str
    task_id: str
    issue: IssueRef
    autofix: bool = True
    is_open: bool = True
    data: dict[str, Any] = field(default_factory=dict)
    version: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0
