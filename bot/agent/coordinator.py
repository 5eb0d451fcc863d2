"""ExecutionCoordinator (seed 004, 7.1.3): one task from planning to completion.

The worker calls ``await ExecutionCoordinator().run(ctx)`` for each leased task; the
coordinator resumes from the task's checkpoint, reads what people said since the
last look (stop, pause, approvals, feedback), plans (or re-plans), executes,
reflects, revises, delivers, and returns an ``Outcome``. Everything people see
goes out as ``ProgressEvent``s. Typed exits carry their outcome: an unreachable
model pauses the task (once announced), a spent budget asks for a person.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.agent.budget import BudgetExceeded
from bot.agent.cache import PlanCache
from bot.agent.context import Outcome, PauseReason, ProgressKind, TaskContext
from bot.agent.execution import ExecutionLoop
from bot.agent.finalise import Finisher, announce
from bot.agent.plan import PlanDocument
from bot.agent.planning_stage import PlanningFailed, PlanningStage
from bot.agent.prompts import PromptLibrary
from bot.agent.session import Session
from bot.agent.state import AgentState, Phase, can_transition
from bot.llm.base import LLMBadRequest, LLMError, LLMUnavailable
from bot.storage.base import TaskState

__all__ = ["ExecutionCoordinator", "PlanningFailed"]


class ExecutionCoordinator:
    def __init__(
        self,
        *,
        cache: PlanCache | None = None,
        prompts: PromptLibrary | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cache = cache
        self._prompts = prompts
        self._clock = clock
        self._monotonic = monotonic
        self._session: Session | None = None

    # --- the seed's interface --------------------------------------------------------------

    async def execute_with_planning(self, ctx: TaskContext) -> Outcome:
        return await self.run(ctx)

    def get_current_phase(self) -> Phase:
        return self._session.state.phase if self._session else Phase.INITIAL

    def transition_phase(self, from_phase: Phase, to_phase: Phase) -> bool:
        """Move the running task from ``from_phase`` to ``to_phase`` if that is allowed."""
        session = self._session
        if session is None or session.state.phase is not from_phase:
            return False
        if not can_transition(from_phase, to_phase):
            return False
        session.state.phase = to_phase
        return True

    # --- runs --------------------------------------------------------------------------------

    async def _load(self, ctx: TaskContext, *, persist: bool) -> Session:
        data = await ctx.store.load_checkpoint(ctx.task.id) if persist else None
        state = AgentState.from_dict(data) if data else AgentState()
        prompts = self._prompts or PromptLibrary()
        session = Session(
            ctx, state, prompts, clock=self._clock, monotonic=self._monotonic, persist=persist
        )
        self._session = session
        return session

    def _stage(self, session: Session) -> PlanningStage:
        cache = self._cache or PlanCache(session.ctx.store, session.planning, clock=self._clock)
        return PlanningStage(session, cache)

    async def run(self, ctx: TaskContext) -> Outcome:
        """Run the task to its next resting state."""
        session = await self._load(ctx, persist=True)
        if session.state.outcome is not None:
            await announce(session)
            return _stored_outcome(session.state.outcome)
        try:
            return await ExecutionLoop(session, self._stage(session)).drive()
        except LLMUnavailable as exc:
            return await self._llm_down(session, str(exc))
        except BudgetExceeded as exc:
            hint = f"Raise {exc.setting} in the configuration if this task needs more"
            return await Finisher(session).intervene(exc.reason, ask_model=False, hints=[hint])
        except LLMBadRequest as exc:
            reason = f"the model endpoint refused the request: {exc}"
            hint = "Check the llm settings (model name, context size) with `bot doctor`"
            return await Finisher(session).intervene(reason, ask_model=False, hints=[hint])
        except LLMError as exc:
            reason = f"the model call failed: {exc}"
            return await Finisher(session).intervene(reason, ask_model=False)

    async def _llm_down(self, session: Session, error: str) -> Outcome:
        state = session.state
        if not state.llm_pause_notified:
            state.llm_pause_notified = True
            settings = session.ctx.settings.llm
            session.record("paused", reason="llm_unavailable", error=error)
            await session.milestone(
                ProgressKind.PAUSED,
                reason="llm_unavailable",
                endpoint=f"{settings.provider} {settings.base_url}",
                error=error,
            )
        await session.checkpoint()
        wake = self._clock() + session.ctx.settings.llm.health_interval
        reason = PauseReason.LLM_UNAVAILABLE
        return Outcome(TaskState.PAUSED, reason=reason.value, wake_at=wake, pause=reason)

    async def plan_only(self, ctx: TaskContext) -> PlanDocument:
        """Plan the task and return the plan; writes nothing (``bot run --dry-run``).

        Raises ``PlanningFailed`` when no acceptable plan comes out (the goal is unclear,
        the task cannot be decomposed, or the plan is rejected twice)."""
        session = await self._load(ctx, persist=False)
        stage = self._stage(session)
        return await stage.plan_for(await stage.context(), stage.engine())


def _stored_outcome(data: dict[str, object]) -> Outcome:
    summary = data.get("summary")
    return Outcome(
        TaskState(str(data["state"])),
        summary=dict(summary) if isinstance(summary, dict) else {},
        reason=str(data.get("reason", "")),
    )
