"""What a safe point heard from people, as a value (``Heard``), for the loop to act on:
stop, pause, go on waiting (with the outcome), ask again (a request that timed out),
plan again (answers arrived), approved, rejected (a ``Rejection`` for the WAIT stage),
or nothing that changes the stage. ``bot.agent.people`` reads the messages into one.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.record.state import ActionRecord, Waiting
from bot.run_events import Outcome, WaitKind
from bot.storage.base import TaskState

WAITING_FOR_ANSWERS = "waiting for answers to questions"


def waiting_for_answers() -> Outcome:
    return Outcome(TaskState.AWAITING_INPUT, reason=WAITING_FOR_ANSWERS)


@dataclass(frozen=True, slots=True)
class Rejection:
    """A person rejected what the task waited for; ``record``: a rejected tool call."""

    kind: WaitKind
    why: str
    record: ActionRecord | None = None


@dataclass(frozen=True, slots=True)
class Stop:
    by: str


@dataclass(frozen=True, slots=True)
class Pause:
    by: str


@dataclass(frozen=True, slots=True)
class GoOnWaiting:
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class AskAgain:
    """The approval request timed out and the task was resumed: post it again."""

    request: Waiting


@dataclass(frozen=True, slots=True)
class Replan:
    """Answers (or a rejected best guess) came: plan again with them."""


@dataclass(frozen=True, slots=True)
class Approved:
    """What the task waited for is approved: execute."""


@dataclass(frozen=True, slots=True)
class Nothing:
    """Nothing that moves the stage; ``read``: new messages were read (save them)."""

    read: bool = False


Heard = Stop | Pause | GoOnWaiting | AskAgain | Replan | Approved | Rejection | Nothing
