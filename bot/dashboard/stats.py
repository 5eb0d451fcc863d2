"""What the dashboard's overview counts, from the tasks the store lists. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bot.storage.base import Task, TaskState

ENDED = frozenset({TaskState.DONE, TaskState.NEEDS_HUMAN, TaskState.FAILED, TaskState.STOPPED})


@dataclass(frozen=True, slots=True)
class Rates:
    """Tasks that ended within a window, and the share that ended done / needing help."""

    window: str
    ended: int
    done: int
    help_needed: int

    @property
    def success_rate(self) -> str:
        return percent(self.done, self.ended)

    @property
    def help_rate(self) -> str:
        return percent(self.help_needed, self.ended)


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "–"


def rates(tasks: Iterable[Task], now: float, window: str, seconds: float) -> Rates:
    ended = [t for t in tasks if t.state in ENDED and t.updated_at >= now - seconds]
    return Rates(
        window=window,
        ended=len(ended),
        done=sum(1 for t in ended if t.state is TaskState.DONE),
        help_needed=sum(1 for t in ended if t.state is TaskState.NEEDS_HUMAN),
    )
