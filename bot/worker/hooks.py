"""Tasks that a part outside the worker runs through it: ``bot eval run --queue``'s.

Such a task is leased, run and stored like any other, by whichever worker takes it; what
differs is given by the hook the composition root (``bot serve``) hands the worker: the
task's forge, model and settings (``take``), and what follows each of its outcomes in
place of the change request's aftercare (``ended``). The worker knows nothing of what the
hook does with them; a worker without a hook refuses such a task (``unhooked``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bot.config import Settings
from bot.forges.base import Forge
from bot.llm.base import LLM
from bot.run_events import Outcome
from bot.storage.base import Task, TaskState


@dataclass(frozen=True)
class HookedRun:
    """What one run of a hooked task uses in place of the runtime's parts."""

    forge: Forge
    llm: LLM | None = None  # None: the runtime's model
    settings: Callable[[Settings], Settings] = lambda settings: settings


class TaskHook(Protocol):
    def claims(self, task: Task) -> bool:
        """Whether the task is the hook's (pure: from its request)."""
        ...

    async def take(self, task: Task) -> HookedRun | Outcome:
        """The parts the task's run uses, or the outcome that ends it without a run."""
        ...

    async def forge(self, task: Task) -> Forge | None:
        """The task's forge alone, for a report after its run (no side effect)."""
        ...

    async def ended(self, task: Task, outcome: Outcome) -> None:
        """What follows an outcome this worker stored for the task (any outcome, resting
        or not; never one a lost lease kept from being stored)."""
        ...


def hooked(task: Task) -> bool:
    """Whether the task can run only with a hook (an evaluation task)."""
    return task.request.evaluation is not None


def unhooked(task: Task) -> Outcome:
    """The outcome of such a task on a worker without a hook."""
    return Outcome(
        TaskState.FAILED,
        reason="an evaluation task runs only on a worker of `bot serve` (docs/eval.md)",
    )
