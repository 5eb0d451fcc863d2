"""Whether a task run is still getting anywhere: the watchdog's evidence.

The worker gives each run a ``RunProgress`` in a context variable; the places where a
run talks to the world (store transactions, forge calls, model calls, tool calls)
wrap the call in ``step(what)``. A step's start and end both count as progress, and
while it is under way it is named, so a run that stops moving can be reported with
what it awaits. Outside a run (webhooks, the dispatcher) ``step`` does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

Clock = Callable[[], float]


@dataclass(slots=True)
class RunProgress:
    """The last time a run moved, and the steps it has under way (by start time)."""

    clock: Clock = time.monotonic
    last: float = 0.0
    steps: dict[int, tuple[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.last = self.clock()

    def idle_for(self) -> float:
        return self.clock() - self.last

    def awaiting(self) -> list[str]:
        """The steps under way, oldest first, each with how long it has been waiting."""
        now = self.clock()
        ordered = sorted(self.steps.values(), key=lambda step: step[1])
        return [f"{what} (for {now - since:.0f} s)" for what, since in ordered]


_current: contextvars.ContextVar[RunProgress | None] = contextvars.ContextVar(
    "bot_run_progress", default=None
)
_ids = itertools.count()


def watch(progress: RunProgress) -> contextvars.Context:
    """A copy of the current context in which runs report to ``progress``: create the
    run's asyncio task with it (``asyncio.create_task(coro, context=...)``)."""
    context = contextvars.copy_context()
    context.run(_current.set, progress)
    return context


@contextlib.contextmanager
def step(what: str) -> Iterator[None]:
    """Mark one call to the outside world (``what`` names it for the watchdog's log)."""
    progress = _current.get()
    if progress is None:
        yield
        return
    key = next(_ids)
    now = progress.clock()
    progress.last = now
    progress.steps[key] = (what, now)
    try:
        yield
    finally:
        progress.steps.pop(key, None)
        progress.last = progress.clock()


def awaited_by(task: asyncio.Task[Any]) -> list[str]:
    """Where ``task`` is suspended, outermost first: the chain of coroutines it awaits
    (``function (file:line)``), for a log line about a run that stopped moving."""
    chain: list[str] = []
    awaitable: object = task.get_coro()
    while awaitable is not None and len(chain) < 40:
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "gi_frame", None)
        if frame is not None:
            code = frame.f_code
            chain.append(f"{code.co_qualname} ({code.co_filename}:{frame.f_lineno})")
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "gi_yieldfrom", None)
    return chain


def describe_stall(task_id: str, progress: RunProgress, *, awaiting: Sequence[str] = ()) -> str:
    """One line for the log and ``/readyz``: how long the run has not moved and on what."""
    steps = progress.awaiting()
    where = "; ".join(steps) if steps else "no call to the store, forge, model or a tool"
    text = f"task {task_id} made no progress for {progress.idle_for():.0f} s, awaiting {where}"
    if awaiting:
        text += " at " + " <- ".join(reversed(awaiting[-3:]))
    return text
