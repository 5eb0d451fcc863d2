"""What the bot does about an intent: one frozen dataclass per action (``Action``), the
short replies by name (``ReplyKind``), and the task states that wait for people
(``WAITING_STATES``). Data only: ``bot.triggers.decisions`` chooses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from bot.events import CommandName, MessageKind, TaskRequest
from bot.storage.base import TaskState


class ActionKind(StrEnum):
    CREATE_TASK = "create_task"
    MESSAGE = "message"  # a message for the active task (feedback or command)
    REPLY = "reply"  # a short comment (``text`` names its template) quoting what it answers
    STATUS = "status"  # reply with the task's status
    REACT = "react"
    ROUND = "round"  # collect review activity on the bot's change request into one round
    AUTOFIX = "autofix"  # switch the CI fix rounds of the bot's change request


class ReplyKind(StrEnum):
    """The short replies (each a template of ``bot/comments/templates``)."""

    DENIED = "denied"
    HELP = "help"
    ALREADY_RUNNING = "already_running"
    RETRY_WHILE_ACTIVE = "retry_while_active"
    NO_ACTIVE_TASK = "no_active_task"
    AUTOFIX_ON = "autofix_on"
    AUTOFIX_OFF = "autofix_off"
    AUTOFIX_USAGE = "autofix_usage"
    AUTOFIX_NOT_WATCHED = "autofix_not_watched"


@dataclass(frozen=True, slots=True)
class CreateTask:
    kind: ClassVar[ActionKind] = ActionKind.CREATE_TASK
    request: TaskRequest


@dataclass(frozen=True, slots=True)
class SendMessage:
    """A message for the active task: feedback, or a command (``command`` names it)."""

    kind: ClassVar[ActionKind] = ActionKind.MESSAGE
    task_id: str
    message_kind: MessageKind
    payload: dict[str, object] = field(default_factory=dict)
    requeue: bool = False
    quote: str = ""
    command: CommandName | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    kind: ClassVar[ActionKind] = ActionKind.REPLY
    text: ReplyKind
    quote: str = ""


@dataclass(frozen=True, slots=True)
class ShowStatus:
    kind: ClassVar[ActionKind] = ActionKind.STATUS
    task_id: str | None = None
    quote: str = ""


@dataclass(frozen=True, slots=True)
class React:
    kind: ClassVar[ActionKind] = ActionKind.REACT
    text: str = "eyes"


@dataclass(frozen=True, slots=True)
class ScheduleRound:
    """Review activity on the bot's change request with no task running there: it counts
    towards one review round, which starts after ``review.quiet_seconds`` of quiet."""

    kind: ClassVar[ActionKind] = ActionKind.ROUND


@dataclass(frozen=True, slots=True)
class SetAutofix:
    """``/agent autofix on|off`` on a change request: its CI fix rounds on or off."""

    kind: ClassVar[ActionKind] = ActionKind.AUTOFIX
    enabled: bool
    quote: str = ""


Action = CreateTask | SendMessage | Reply | ShowStatus | React | ScheduleRound | SetAutofix


WAITING_STATES = frozenset(
    {TaskState.AWAITING_APPROVAL, TaskState.AWAITING_INPUT, TaskState.PAUSED}
)
