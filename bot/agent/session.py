"""One run of one task: its context, state, history, budget, and the moves between phases.

The loop builds one ``Session`` per run and hands its parts to the helpers: the model
caller (``caller``), the run directory's logs (``runlog``: conversation.jsonl,
errors.log, artifacts), and itself as their ``Recorder`` (``bot.agent.ports``): it owns
the checkpoint (``checkpoint()`` after every action), the planning history, token
accounting (a USAGE event and a history entry per model call), the stage (``to``
refuses a move the stage table does not have) and the phase people see (``show``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.agent.budget import Budget, UsageLedger
from bot.agent.context import ProgressKind, TaskContext
from bot.agent.history import PlanningHistory
from bot.agent.llm_calls import PhaseCaller, usage_entry
from bot.agent.plan import PlanDocument
from bot.agent.prompts import PromptLibrary
from bot.agent.runlog import RunLog
from bot.agent.snapshot import plan_of, subtask_statuses
from bot.agent.state import AgentState, Phase, Stage, can_move
from bot.config import secret_values
from bot.llm.base import Usage
from bot.llm.prices import model_price
from bot.run_events import progress_event


class InvalidTransition(RuntimeError):
    """The loop tried a stage change the stage table does not allow (a bug)."""


@dataclass
class Session:
    ctx: TaskContext
    state: AgentState
    prompts: PromptLibrary
    clock: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    persist: bool = True
    budget: Budget = field(init=False)
    caller: PhaseCaller = field(init=False)
    runlog: RunLog = field(init=False)
    history: PlanningHistory = field(init=False)
    _started: float = field(init=False)
    _base_elapsed: float = field(init=False)
    _plan: PlanDocument | None = field(init=False, default=None)
    _shown: Phase = field(init=False, default=Phase.INITIAL)
    _lock: asyncio.Lock = field(init=False, default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        settings = self.ctx.settings
        self.budget = Budget(
            max_tokens_per_task=settings.llm.max_tokens_per_task,
            max_tokens_per_call=settings.llm.max_tokens_per_call,
            total_timeout=settings.planning.execution.total_timeout,
            ledger=UsageLedger.from_dict(self.state.usage),
            price=model_price(settings),
            max_cost=settings.planning.budget.max_cost,
        )
        self.runlog = RunLog(
            self.ctx.data_dir,
            self.ctx.task.id,
            secrets=secret_values(settings),
            enabled=self.persist,
        )
        self.caller = PhaseCaller(
            self.ctx.llm,
            self.prompts,
            self.budget,
            temperature=settings.llm.temperature,
            on_usage=self._on_usage,
            journal=self.runlog,
        )
        self.history = PlanningHistory(self.ctx.data_dir, self.ctx.task.id, clock=self.clock)
        self._started = self.monotonic()
        self._base_elapsed = self.state.elapsed
        if self.state.plan is not None:
            self._plan = plan_of(self.state.plan)
        self._shown = self.state.phase()

    # --- shortcuts ---------------------------------------------------------------------------

    @property
    def plan(self) -> PlanDocument | None:
        return self._plan

    def set_plan(self, plan: PlanDocument | None) -> None:
        self._plan = plan
        self.state.plan = plan.to_document() if plan is not None else None

    def elapsed(self) -> float:
        return self._base_elapsed + (self.monotonic() - self._started)

    def check_time(self) -> None:
        """Raise ``BudgetExceeded`` once the task has run longer than it may."""
        self.budget.check_time(self.elapsed())

    def next_seq(self, kind: ProgressKind) -> int:
        seq = self.state.milestones.get(kind.value, 0) + 1
        self.state.milestones[kind.value] = seq
        return seq

    # --- effects -----------------------------------------------------------------------------

    async def checkpoint(self) -> None:
        """Save the state; parallel actions take turns."""
        if not self.persist:
            return
        async with self._lock:
            self.state.elapsed = self.elapsed()
            self.state.usage = self.budget.ledger.to_dict()
            await self.ctx.store.save_checkpoint(self.ctx.task.id, self.state.to_dict())

    async def emit(self, kind: ProgressKind, **data: Any) -> None:
        if self.persist:
            await self.ctx.emit(progress_event(kind, data))

    async def milestone(self, kind: ProgressKind, **data: Any) -> None:
        """A milestone event with a stable sequence number (a re-run replaces, not repeats)."""
        await self.emit(kind, seq=self.next_seq(kind), **data)

    def record(self, entry_type: str, **fields: Any) -> None:
        if self.persist:
            self.history.append(entry_type, **fields)

    def to(self, target: Stage) -> None:
        """Move the task to the ``target`` stage (saved with the next checkpoint)."""
        current = self.state.stage
        if not can_move(current, target):
            raise InvalidTransition(f"{current.value} -> {target.value} is not a stage move")
        self.state.stage = target

    async def show(self, phase: Phase) -> None:
        """Tell the status comment the phase (once while it stays in execution)."""
        if self._shown is phase and phase in (Phase.EXECUTION, Phase.COMPLETION):
            return
        self._shown = phase
        await self.emit(ProgressKind.PHASE, phase=phase.value)

    @property
    def shown_phase(self) -> Phase:
        return self._shown

    async def _on_usage(self, template: str, usage: Usage, calls: int) -> None:
        self.state.paused = None  # the model answers: an announced outage is over
        self.state.outage_pauses = 0
        ledger = self.budget.ledger
        self.record(
            "usage",
            phase=template,
            **usage_entry(usage),
            calls=calls,
            total_tokens=ledger.total,
            cost=round(ledger.cost, 6),
        )
        await self.emit(
            ProgressKind.USAGE,
            phase=template,
            total_tokens=ledger.total,
            prompt_tokens=ledger.prompt_tokens,
            completion_tokens=ledger.completion_tokens,
            cached_tokens=ledger.cached_tokens,
            cost=round(ledger.cost, 6),
            calls=ledger.calls,
            by_phase=ledger.to_dict()["by_phase"],
            budget=self.budget.max_tokens_per_task,
        )

    # --- views ---------------------------------------------------------------------------------

    def statuses(self) -> dict[str, str]:
        """Subtask id -> pending / running / done / failed, for the plan checklist."""
        return subtask_statuses(self.state, self._plan)
