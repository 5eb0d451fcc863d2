"""One run of one task: what the worker hands the agent, and the run's record keeping.

The worker builds a ``TaskContext`` for each leased task and calls
``AgentLoop().run(ctx)``; the agent reports what people should see through
``ctx.emit`` (the progress events of ``bot.run_events``, which the comments render into
the status comment and milestone comments) and returns an ``Outcome`` that the worker
stores and turns into labels.

The loop builds one ``Session`` per run and hands it to its helpers: the model caller
(``caller``), the run directory's logs (``runlog``: conversation.jsonl, errors.log,
artifacts), the checkpoint (``checkpoint()`` after every action), the planning history
(``record``), token accounting (a USAGE event and a history entry per model call) and
the phase people see (``show``). The stage is not the session's: only the loop moves it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from bot import tracing
from bot.config import Settings, secret_values
from bot.config.overrides import EffectivePlanning
from bot.events import IssueRef
from bot.forges.base import Forge
from bot.llm.base import LLM, Usage
from bot.llm.budget import Budget, UsageLedger
from bot.llm.calls import PhaseCaller, usage_entry
from bot.llm.prices import model_price
from bot.llm.prompts import PromptLibrary
from bot.record.history import HistoryKind, PlanningHistory
from bot.record.plan import PlanDocument
from bot.record.runlog import RunLog
from bot.record.snapshot import plan_of, subtask_statuses
from bot.record.state import AgentState, Phase
from bot.run_events import (
    Emit,
    ErrorCategory,
    PhaseChanged,
    ProgressEvent,
    ProgressKind,
    UsageReport,
)
from bot.storage.base import CachedPlans, Checkpoints, Messages, Task
from bot.storage.retry import PersistenceFailed, persist
from bot.tools.factory import BuiltTools
from bot.tools.registry import ToolRegistry

MAX_TRACES = 50  # runs whose trace a checkpoint remembers


class RunStore(Checkpoints, Messages, CachedPlans, Protocol):
    """What a run keeps in the store: its checkpoint, the messages it reads, the plan
    cache."""


@dataclass
class TaskContext:
    task: Task
    issue: IssueRef
    settings: Settings
    store: RunStore
    forge: Forge
    llm: LLM
    tools: ToolRegistry
    emit: Emit
    data_dir: Path
    workspace: Path | None = None
    # The parts behind ``tools`` (workspace clone, sandbox, the task's branch, the quality
    # gate): the coordinator delivers through them. None: no workspace, no branch.
    built: BuiltTools | None = None
    # How ``settings.planning`` was merged from the server's, the repository's and the
    # requester's (the run report shows it). None: the server's, unchanged.
    planning: EffectivePlanning | None = None
    # A base round: the paths the merge of the base left conflicted (the worker merged it).
    conflicts: tuple[str, ...] = ()


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
            max_bytes=settings.storage.run_dir_mb << 20,
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
        if self.ctx.built is not None:  # the memo tool writes into the checkpoint's own list
            self.ctx.built.memo.bind(self.state.memo)
        self._started = self.monotonic()
        self._base_elapsed = self.state.elapsed
        traced = tracing.traceparent() if self.persist else ""
        if traced and traced not in self.state.traces:  # the run's trace, kept from now on
            self.state.traces = [*self.state.traces, traced][-MAX_TRACES:]
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
            data, store, task = self.state.to_dict(), self.ctx.store, self.ctx.task.id
            try:  # retried with backoff; a store that keeps failing stops the run
                await persist(lambda: store.save_checkpoint(task, data), what="the checkpoint")
            except PersistenceFailed as exc:
                self.runlog.error(ErrorCategory.PERSISTENCE, str(exc))
                raise

    async def emit(self, event: ProgressEvent) -> None:
        if self.persist:
            await self.ctx.emit(event)

    async def milestone(self, event: ProgressEvent) -> None:
        """A milestone event with a stable sequence number (a re-run replaces, not repeats)."""
        await self.emit(replace(event, seq=self.next_seq(event.kind)))

    def record(self, kind: HistoryKind, **fields: Any) -> None:
        if self.persist:
            self.history.append(kind, **fields)

    async def show(self, phase: Phase) -> None:
        """Tell the status comment the phase (once while it stays in execution)."""
        if self._shown is phase and phase in (Phase.EXECUTION, Phase.COMPLETION):
            return
        self._shown = phase
        await self.emit(PhaseChanged(phase=phase.value))

    @property
    def shown_phase(self) -> Phase:
        return self._shown

    async def _on_usage(self, template: str, usage: Usage, calls: int) -> None:
        self.state.paused = None  # the model answers: an announced outage is over
        self.state.outage_pauses = 0
        ledger = self.budget.ledger
        self.record(
            HistoryKind.USAGE,
            phase=template,
            **usage_entry(usage),
            calls=calls,
            total_tokens=ledger.total,
            cost=round(ledger.cost, 6),
        )
        await self.emit(
            UsageReport(
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
        )

    # --- views ---------------------------------------------------------------------------------

    def statuses(self) -> dict[str, str]:
        """Subtask id -> pending / running / done / failed, for the plan checklist."""
        return subtask_statuses(self.state, self._plan)
