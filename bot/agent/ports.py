"""The narrow parts the loop hands its helpers, as protocols.

A helper never sees the whole run: it gets the task's ``AgentState``, the settings
section, model caller and tools it uses, and these. ``Recorder`` is the run's record
(the current plan, the checkpoint, progress events, the planning history, the stage
and the phase people see); ``RequestApproval`` and ``RunAction`` are what one helper
needs of another, wired by the loop, so the helpers never import each other.
"""

from __future__ import annotations

from typing import Any, Protocol

from bot.agent.context import ProgressKind
from bot.agent.plan import PlanDocument, PlannedAction
from bot.agent.state import Phase, Stage, Waiting, WaitKind
from bot.tools.registry import Tool


class Recorder(Protocol):
    @property
    def plan(self) -> PlanDocument | None:
        """The current plan, typed (the state keeps its document)."""
        ...

    def set_plan(self, plan: PlanDocument | None) -> None: ...

    def statuses(self) -> dict[str, str]:
        """Subtask id -> pending / running / done / failed, for the plan checklist."""
        ...

    async def checkpoint(self) -> None:
        """Save the state (after every action)."""
        ...

    async def emit(self, kind: ProgressKind, **data: Any) -> None: ...

    async def milestone(self, kind: ProgressKind, **data: Any) -> None:
        """A milestone event with a stable sequence number (a re-run replaces, not repeats)."""
        ...

    def record(self, entry_type: str, **fields: Any) -> None:
        """An entry in the planning history."""
        ...

    def to(self, target: Stage) -> None:
        """Move the task to the ``target`` stage (saved with the next checkpoint)."""
        ...

    async def show(self, phase: Phase) -> None:
        """Tell the status comment the phase."""
        ...


class RequestApproval(Protocol):
    async def __call__(
        self, kind: WaitKind, what: str, text: str, asked: Waiting | None = None
    ) -> None:
        """Post the request and wait: raises ``Exit`` (awaiting approval)."""
        ...


class RunAction(Protocol):
    async def __call__(
        self,
        action: PlannedAction,
        *,
        feedback: str = "",
        choices: list[Tool] | None = None,
        ready_tool: str = "",
    ) -> object:
        """Run one action (``choices``: the tools the model may pick from; ``ready_tool``:
        one of them the model names to say it is done, recorded and not called)."""
        ...
