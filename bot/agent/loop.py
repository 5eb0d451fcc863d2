"""The agent loop: one task, stage by stage, from its checkpoint to its next resting point.

The worker calls ``await AgentLoop().run(ctx)`` for each leased task. The task's stage
is in its checkpoint (``AgentState.stage``) and is the one source of truth: each turn
of the loop reads what people said (the safe point: stop, pause, answers, approvals,
feedback, the time budget) and then runs the handler ``HANDLERS[stage]``, which does
one step and moves the stage on. Every way out (done, needs a person, waiting, paused,
stopped, budget spent, the model unusable) is an ``Exit`` carrying the run's
``Outcome``, raised where it happens and caught here, once; a helper that finds the run
cannot go on raises ``NeedsPerson``, and the loop asks the ``Finisher`` for a person.
``wire`` gives each helper what it needs (and no helper another one whole).

    PLAN     plan (or re-plan after answers)
    WAIT     a person rejected what the task waited for: revise, or reflect on the call
    EXECUTE  feedback first; a plan not approved waits for approval (/agent plan, and
             revised plans with require_human_approval); then the next batch of actions
             (before a run's first batch: set-up of the workspace, preparation.py)
    REFLECT  the batch a stopped worker ran and did not reflect on
    REVISE   a revision that was cut short: the current plan goes on
    DELIVER  quality gate, push, change request, completion summary
    DONE     the stored outcome (announced once)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.agent.actions import ActionRunner, CallFailed, PendingApproval
from bot.agent.artifacts import Artifacts
from bot.agent.batch_review import BatchReview
from bot.agent.budget import BudgetExceeded
from bot.agent.cache import PlanCache
from bot.agent.context import Outcome, PauseReason, ProgressKind, TaskContext
from bot.agent.delivery import Delivery
from bot.agent.exits import Exit, NeedsPerson
from bot.agent.finalise import Finisher, announce, disagreement
from bot.agent.plan import PlanDocument, PlannedAction
from bot.agent.plan_rules import next_batch
from bot.agent.planning_stage import PlanningFailed, PlanningStage
from bot.agent.preparation import Preparation
from bot.agent.prompts import PromptLibrary
from bot.agent.push_failure import DeliveryFailed
from bot.agent.reflection import RevisionSuggestion
from bot.agent.revision import Reviser
from bot.agent.session import Session
from bot.agent.state import ActionRecord, AgentState, Phase, Stage
from bot.agent.waiting import Rejection, Waits
from bot.forges.base import ForgeError
from bot.llm.base import LLMBadRequest, LLMError, LLMUnavailable
from bot.storage.base import TaskState

log = logging.getLogger("bot.agent")

__all__ = ["HANDLERS", "AgentLoop", "Exit", "PlanningFailed"]


@dataclass
class Run:
    """The parts of one run, each given what it needs by ``wire``."""

    session: Session  # the state, the model caller, the run's logs, and the Recorder
    planning: PlanningStage
    waits: Waits
    runner: ActionRunner
    reviser: Reviser
    review: BatchReview
    finisher: Finisher
    delivery: Delivery
    preparation: Preparation
    rejection: Rejection | None = None  # what the last safe point found rejected

    @property
    def state(self) -> AgentState:
        return self.session.state


def wire(ctx: TaskContext, session: Session, cache: PlanCache, clock: Callable[[], float]) -> Run:
    """The helpers of one run: the state, the settings section, the model caller, the tools
    and the recorder each needs, and the one helper call another makes (a bound method)."""
    state, recorder, caller, runlog = session.state, session, session.caller, session.runlog
    settings = ctx.settings
    artifacts = Artifacts(ctx.task, ctx.issue, state, runlog, ctx.built, ctx.planning)
    planning = PlanningStage(ctx, state, recorder, caller, cache, clock=clock)
    waits = Waits(
        state,
        recorder,
        ctx.store,
        ctx.task.id,
        settings.planning.revision,
        artifacts,
        runlog,
        clock=clock,
        check_time=session.check_time,
    )
    runner = ActionRunner(
        state,
        recorder,
        caller,
        ctx.tools,
        settings.planning.execution,
        runlog,
        max_tokens_per_call=settings.llm.max_tokens_per_call,
        repo_instructions=ctx.built.instructions if ctx.built is not None else "",
    )
    revision = settings.planning.revision
    reviser = Reviser(state, recorder, revision, planning.engine)
    review = BatchReview(state, recorder, caller, settings.planning, ctx.tools, reviser.revise)
    delivery = Delivery(
        state,
        recorder,
        ctx.issue,
        ctx.forge,
        ctx.built,
        ctx.tools,
        artifacts,
        runlog,
        runner.run_one,
        waits.request_approval,
        draft=settings.workspace.draft_change_requests,
        gate_timeout=settings.sandbox.timeout,
    )
    finisher = Finisher(
        state,
        recorder,
        caller,
        artifacts,
        command_prefix=settings.commands.prefix,
        save_work=delivery.save_work,
    )
    waits.save_work = delivery.save_work
    preparation = Preparation(state, recorder, ctx.built, runlog, finisher.intervene)
    return Run(session, planning, waits, runner, reviser, review, finisher, delivery, preparation)


# --- the stages ------------------------------------------------------------------------------


async def plan(run: Run) -> None:
    if run.session.plan is None:
        await run.planning.run()
    run.session.to(Stage.EXECUTE)  # a plan that needs approval waits for it there


async def wait(run: Run) -> None:
    rejection, run.rejection = run.rejection, None
    if rejection is None:  # nothing left to wait for
        run.session.to(Stage.EXECUTE)
    elif rejection.record is not None:  # a rejected call is a failed action
        await run.review.after_batch([rejection.record])
    else:
        suggestion = RevisionSuggestion(rejection.why)
        await run.reviser.revise(suggestion, issues=[rejection.why])


async def execute(run: Run) -> None:
    if not (run.state.pending_feedback or run.state.batch):
        # /agent plan or require_human_approval: only the exact plan a person approved runs
        await run.waits.ensure_plan_approved(plan_only=run.planning.plan_only())
    await run.session.show(Phase.EXECUTION)
    if run.state.pending_feedback:
        await run.review.feedback()
    elif run.state.batch:
        run.session.to(Stage.REFLECT)
    else:
        plan = run.session.plan
        assert plan is not None
        limit = run.session.ctx.settings.planning.execution.max_parallel
        batch = next_batch(plan, run.state.finished_keys(), max_parallel=limit)
        if batch:
            await run_batch(run, batch)
        else:
            run.session.to(Stage.DELIVER)


async def run_batch(run: Run, batch: list[PlannedAction]) -> None:
    await run.preparation.ensure()  # set-up before the run's first action
    run.state.batch = [action.key for action in batch]
    outcomes = await run.runner.run_batch(batch)
    errors = [o.error for o in outcomes if isinstance(o, CallFailed)]
    if errors:
        await run.session.checkpoint()
        raise errors[0]
    await run.review.after_batch([o for o in outcomes if isinstance(o, ActionRecord)])
    approvals = [o for o in outcomes if isinstance(o, PendingApproval)]
    if approvals:
        first = approvals[0]
        purpose = " - ".join(p for p in (first.action.purpose, first.why) if p)
        await run.waits.ask_tool_approval(first.call, purpose)


async def reflect(run: Run) -> None:
    if run.state.pending_feedback:
        await run.review.feedback()
    else:
        await run.review.resume()


async def revise(run: Run) -> None:
    run.session.to(Stage.EXECUTE)


async def deliver(run: Run) -> None:
    if run.state.pending_feedback:
        await run.review.feedback()
        return
    await run.preparation.ensure()  # the gate needs the environment (a run resumed here)
    try:
        links = await run.delivery.deliver()
    except DeliveryFailed as exc:
        outcome = await run.finisher.intervene(exc.reason, hints=exc.hints, save=False)
        raise Exit(outcome) from exc
    assessment = await run.finisher.assess(links)
    if assessment.achieved:
        outcome = await run.finisher.complete(links, assessment)
        await run.planning.remember()
        raise Exit(outcome)
    verdict = assessment.verdict
    if assessment.claimed:  # the model says done; the record disagrees: reflect, revise
        why = assessment.why_not()
        await run.session.milestone(
            ProgressKind.REFLECTION,
            action="completion",
            status="failure",
            evaluation=why,
            issues=list(verdict.problems),
        )
        evaluation = {"status": "failure", "evaluation": why, "issues": list(verdict.problems),
                      "plan_revision_needed": True}  # fmt: skip
        run.session.record("reflection", action="completion", evaluation=evaluation)
        run.delivery.reopen()
        await run.reviser.revise(RevisionSuggestion(why), issues=list(verdict.problems))
        return
    reason = "the goal was not achieved"
    if verdict.problems:
        reason += "; " + disagreement(verdict)
    raise Exit(await run.finisher.intervene(reason, verdict=verdict))


async def done(run: Run) -> None:
    await announce(run.state, run.session)
    stored = run.state.outcome
    assert stored is not None
    raise Exit(stored_outcome(stored))


HANDLERS: dict[Stage, Callable[[Run], Awaitable[None]]] = {
    Stage.PLAN: plan,
    Stage.WAIT: wait,
    Stage.EXECUTE: execute,
    Stage.REFLECT: reflect,
    Stage.REVISE: revise,
    Stage.DELIVER: deliver,
    Stage.DONE: done,
}


# --- the loop --------------------------------------------------------------------------------


async def save_work_after_crash(run: Run) -> None:
    try:
        await run.delivery.save_work()
    except Exception:  # the crash is what the worker reports; this is the best effort
        log.exception(
            "task %s: the work could not be pushed after a crash", run.session.ctx.task.id
        )


class AgentLoop:
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

    async def run(self, ctx: TaskContext) -> Outcome:
        """Run the task to its next resting state."""
        run = await self._start(ctx, persist=True)
        try:
            while True:
                if run.state.stage is not Stage.DONE:
                    run.rejection = await run.waits.safe_point()
                await HANDLERS[run.state.stage](run)
        except Exit as end:
            return end.outcome
        except NeedsPerson as end:
            return await run.finisher.intervene(end.reason, partial_plan=end.partial_plan)
        except LLMUnavailable as exc:
            return await self._llm_down(run.session, str(exc))
        except BudgetExceeded as exc:
            hint = f"Raise {exc.setting} in the configuration if this task needs more"
            return await run.finisher.intervene(exc.reason, ask_model=False, hints=[hint])
        except LLMBadRequest as exc:
            reason = f"the model endpoint refused the request: {exc}"
            hint = (
                "Check the llm settings (model name, context size) with `bot doctor`; if the "
                "server refuses structured output, pin llm.structured_output"
            )
            return await run.finisher.intervene(reason, ask_model=False, hints=[hint])
        except LLMError as exc:
            reason = f"the model call failed: {exc}"
            return await run.finisher.intervene(reason, ask_model=False)
        except ForgeError:
            raise  # transient: the worker retries the task, which finds its work in place
        except Exception:
            # A crash ends the task as failed (the worker says so): its work so far is
            # pushed first, so nothing is lost with the workspace (docs/planning.md#completion).
            await save_work_after_crash(run)
            raise

    async def plan_only(self, ctx: TaskContext) -> PlanDocument:
        """Plan the task and return the plan; writes nothing (``bot run --dry-run``).

        Raises ``PlanningFailed`` when no acceptable plan comes out (the goal is unclear,
        the task cannot be decomposed, or the plan is rejected twice)."""
        planning = (await self._start(ctx, persist=False)).planning
        return await planning.plan_for(await planning.context(), planning.engine())

    async def _start(self, ctx: TaskContext, *, persist: bool) -> Run:
        data = await ctx.store.load_checkpoint(ctx.task.id) if persist else None
        state = AgentState.from_dict(data) if data else AgentState()
        prompts = self._prompts or PromptLibrary()
        session = Session(
            ctx, state, prompts, clock=self._clock, monotonic=self._monotonic, persist=persist
        )
        cache = self._cache or PlanCache(ctx.store, ctx.settings.planning, clock=self._clock)
        return wire(ctx, session, cache, self._clock)

    async def _llm_down(self, session: Session, error: str) -> Outcome:
        """Pause until the model answers again; people are told once per outage."""
        reason = PauseReason.LLM_UNAVAILABLE
        settings = session.ctx.settings.llm
        if session.state.paused is not reason:
            session.state.paused = reason
            session.record("paused", reason=reason.value, error=error)
            await session.milestone(
                ProgressKind.PAUSED,
                reason=reason.value,
                endpoint=f"{settings.provider} {settings.base_url}",
                error=error,
            )
        wait = outage_wait(
            session.state.outage_pauses,
            interval=settings.health_interval,
            cap=settings.max_pause_interval,
        )
        session.state.outage_pauses += 1
        await session.checkpoint()
        wake = self._clock() + wait
        return Outcome(TaskState.PAUSED, reason=reason.value, wake_at=wake, pause=reason)


def outage_wait(pauses: int, *, interval: float, cap: float) -> float:
    """Seconds before a task paused by an outage tries again, when its last ``pauses`` runs
    in a row ended the same way: ``interval``, doubling each time, at most ``cap``."""
    return float(min(interval * 2.0 ** min(pauses, 30), max(cap, interval)))


def stored_outcome(data: dict[str, object]) -> Outcome:
    summary = data.get("summary")
    return Outcome(
        TaskState(str(data["state"])),
        summary=dict(summary) if isinstance(summary, dict) else {},
        reason=str(data.get("reason", "")),
    )
