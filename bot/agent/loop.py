"""The agent loop: one task, stage by stage, from its checkpoint to its next resting point.

The worker calls ``await AgentLoop().run(ctx)`` for each leased task. The stage in the
checkpoint (``AgentState.stage``) is the one source of truth: each turn hears what people
said (the safe point) and runs ``HANDLERS[stage]``. The helpers (planning, people,
execution, review, revision, delivery, finish) do the work and return what came of it
as a value; this module alone moves the stage (``move``) and ends the run: every way out
is an ``Exit`` carrying the run's ``Outcome``, raised here and caught here, once.

    PLAN     plan (or re-plan after answers)
    WAIT     a person rejected what the task waited for: revise, or reflect on the call
    EXECUTE  feedback; an unapproved plan waits; set-up; the next batch (or open-loop call)
    REFLECT  the batch a stopped worker ran and did not reflect on
    REVISE   a revision that was cut short: the current plan goes on
    DELIVER  quality gate, push, change request, completion summary
    DONE     the stored outcome (announced once)
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from bot import tracing
from bot.agent import finish as ends
from bot.agent import people as heard
from bot.agent.cache import PlanCache
from bot.agent.delivery import Delivered, Delivery, NeedsApproval
from bot.agent.execution import ActionRunner, CallFailed, PendingApproval
from bot.agent.finish import Ending, Finish
from bot.agent.people import People, Rejection
from bot.agent.planning import NoPlan, Planning, PlanningFailed
from bot.agent.review import AskAuthor, Continue, GiveUp, Review, ReviewResult
from bot.agent.revision import Revise, Reviser, RevisionSuggestion
from bot.agent.session import Session, TaskContext
from bot.forges.base import ForgeError
from bot.llm.base import LLMError, LLMUnavailable
from bot.llm.budget import BudgetExceeded
from bot.llm.prompts import PromptLibrary
from bot.record.evidence import Verdict
from bot.record.plan import PlanDocument
from bot.record.runlog import Artifacts
from bot.record.state import ActionRecord, AgentState, Phase, Stage, Waiting, can_move
from bot.record.texts import SetupFailed
from bot.run_events import Outcome, Paused, PauseReason
from bot.storage import retry
from bot.storage.base import TaskState

log = logging.getLogger("bot.agent")

__all__ = ["HANDLERS", "AgentLoop", "Exit", "PlanningFailed"]


class Exit(Exception):
    """The one way out of a run: the loop raises it with the run's outcome, and catches it."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.state.value, outcome.reason)
        self.outcome = outcome


class InvalidTransition(RuntimeError):
    """A stage change the stage table does not allow (a bug)."""


@dataclass
class Run:
    """The helpers of one run, each built from the session it records in."""

    session: Session
    planning: Planning
    people: People
    runner: ActionRunner
    review: Review
    reviser: Reviser
    delivery: Delivery
    finish: Finish
    rejection: Rejection | None = None  # what the last safe point found rejected

    @property
    def state(self) -> AgentState:
        return self.session.state


def build(session: Session, cache: PlanCache, clock: Callable[[], float]) -> Run:
    ctx, planning = session.ctx, session.ctx.settings.planning
    artifacts = Artifacts(ctx.task, ctx.issue, session.state, session.runlog, ctx.built,
                          ctx.planning)  # fmt: skip
    runner = ActionRunner(session, planning.execution)
    return Run(
        session,
        Planning(session, cache, clock=clock),
        People(session, planning.revision, clock=clock),
        runner,
        Review(session, planning),
        Reviser(session, planning.revision),
        Delivery(session, runner, artifacts),
        Finish(session, artifacts),
    )


# --- moving the stage and ending the run ------------------------------------------------------


def move(run: Run, target: Stage) -> None:
    """Move the task to the ``target`` stage (saved with the next checkpoint)."""
    current = run.state.stage
    if not can_move(current, target):
        raise InvalidTransition(f"{current.value} -> {target.value} is not a stage move")
    run.state.stage = target


async def end(run: Run, ending: Ending) -> NoReturn:
    """Keep the ending, move to DONE, save, and announce it."""
    ends.keep_ending(run.state, ending)
    move(run, Stage.DONE)
    await run.session.show(Phase.COMPLETION)
    await run.session.checkpoint()
    await ends.announce(run.session)
    raise Exit(ending.outcome)


async def needs_person(
    run: Run, reason: str, *, ask_model: bool = True, partial_plan: dict[str, Any] | None = None,
    hints: Sequence[str] = (), details: dict[str, Any] | None = None,
    verdict: Verdict | None = None, save: bool = True,
) -> NoReturn:  # fmt: skip
    """Stop and ask a person to step in; the work so far is pushed first (``save``)."""
    asked = await run.finish.intervention(
        reason, ask_model=ask_model, partial_plan=partial_plan, hints=hints, details=details,
        verdict=verdict,
    )  # fmt: skip
    saved = await run.delivery.save_work() if save and run.state.outcome is None else {}
    await end(run, await run.finish.close(asked, saved))


async def ask(run: Run, request: Waiting) -> NoReturn:
    """Post an approval request and wait for it."""
    move(run, Stage.WAIT)
    raise Exit(await run.people.ask(request))


async def safe_point(run: Run) -> None:
    """Act on what people said since the last look."""
    session = run.session
    said = await run.people.listen()
    match said:
        case heard.Stop(by=by):
            await run.delivery.artifacts.keep_changes()
            await run.delivery.save_work()  # nothing hidden: the work so far is on the branch
            await session.checkpoint()
            raise Exit(Outcome(TaskState.STOPPED, reason=f"stopped by {by}"))
        case heard.Pause(by=by):
            reason = PauseReason.PERSON
            await session.milestone(Paused(reason=reason.value, by=by))
            await session.checkpoint()
            raise Exit(Outcome(TaskState.PAUSED, reason=f"paused by {by}", pause=reason))
        case heard.GoOnWaiting(outcome=outcome):
            raise Exit(outcome)
        case heard.AskAgain(request=request):
            await ask(run, request)
        case heard.Replan() | heard.Approved():  # plan again with the answers, or go on
            move(run, Stage.PLAN if isinstance(said, heard.Replan) else Stage.EXECUTE)
            await session.checkpoint()
        case Rejection():
            run.rejection = said
            if said.record is not None:
                await session.checkpoint()
            return
        case heard.Nothing(read=read):
            if read:
                await session.checkpoint()
    session.check_time()


async def act_on(run: Run, result: ReviewResult) -> None:
    match result:
        case GiveUp(reason=reason):
            await needs_person(run, reason)
        case AskAuthor(request=request):  # nobody could judge a result: its author may
            await ask(run, request)
        case Revise():
            await revise(run, result)
        case Continue(stage=stage, show=show):
            if stage is not None:
                move(run, stage)
            if show:
                await run.session.show(Phase.EXECUTION)
            await run.session.checkpoint()


async def revise(run: Run, request: Revise) -> None:
    """Revise the plan and go on executing (where a plan that needs approval waits)."""
    over = run.reviser.over_limit(request)
    if over is not None:
        await needs_person(run, over)
    move(run, Stage.REVISE)
    await run.session.show(Phase.REVISION)
    failed = await run.reviser.revise(request)
    if failed is not None:
        await needs_person(run, failed)
    move(run, Stage.EXECUTE)
    await run.session.show(Phase.EXECUTION)
    await run.session.checkpoint()


async def prepare(run: Run) -> None:
    """Set the workspace up before the run's first action; a failure asks a person."""
    failed: SetupFailed | None = await run.runner.prepare()
    if failed is not None:
        await needs_person(run, failed.reason, ask_model=False, hints=failed.hints,
                           details=failed.details)  # fmt: skip


# --- the stages ------------------------------------------------------------------------------


async def plan(run: Run) -> None:
    if run.session.plan is None:
        match await run.planning.run():
            case PlanningFailed() as unclear:
                move(run, Stage.WAIT)
                raise Exit(await run.planning.clarify(unclear))
            case NoPlan(reason=reason, partial_plan=partial):
                await needs_person(run, reason, partial_plan=partial)
    move(run, Stage.EXECUTE)  # a plan that needs approval waits for it there


async def wait(run: Run) -> None:
    rejection, run.rejection = run.rejection, None
    if rejection is None:  # nothing left to wait for
        move(run, Stage.EXECUTE)
    elif rejection.record is not None:  # a rejected call is a failed action
        await act_on(run, await run.review.after_batch([rejection.record]))
    else:
        await revise(run, Revise(RevisionSuggestion(rejection.why), issues=[rejection.why]))


async def execute(run: Run) -> None:
    state = run.state
    if not (state.pending_feedback or state.batch):
        # /agent plan or require_human_approval: only the exact plan a person approved runs
        request = run.people.plan_request(plan_only=run.planning.plan_only())
        if request is not None:
            await ask(run, request)
    await run.session.show(Phase.EXECUTION)
    if state.pending_feedback:
        await act_on(run, await run.review.feedback())
    elif state.batch:
        move(run, Stage.REFLECT)
    else:
        batch = await run.runner.next_actions()  # the open loop: the model's next call
        if not batch:
            move(run, Stage.DELIVER)
            return
        await prepare(run)  # set-up before the run's first action
        state.batch = [action.key for action in batch]
        outcomes = await run.runner.run_batch(batch)
        errors = [o.error for o in outcomes if isinstance(o, CallFailed)]
        if errors:
            await run.session.checkpoint()
            raise errors[0]
        records = [o for o in outcomes if isinstance(o, ActionRecord)]
        await act_on(run, await run.review.after_batch(records))
        approvals = [o for o in outcomes if isinstance(o, PendingApproval)]
        if approvals:
            first = approvals[0]
            purpose = " - ".join(p for p in (first.action.purpose, first.why) if p)
            await ask(run, run.people.tool_request(first.call, purpose))


async def reflect(run: Run) -> None:
    if run.state.pending_feedback:
        await act_on(run, await run.review.feedback())
        return
    finished = run.review.resume()  # a batch a stopped worker ran and did not reflect on
    no_news = Continue(Stage.EXECUTE, show=False)
    await act_on(run, await run.review.after_batch(finished) if finished else no_news)


async def revision(run: Run) -> None:
    move(run, Stage.EXECUTE)


async def deliver(run: Run) -> None:
    if run.state.pending_feedback:
        await act_on(run, await run.review.feedback())
        return
    await prepare(run)  # the gate needs the environment (a run resumed here)
    match await run.delivery.deliver():
        case NeedsApproval(request=request):
            await ask(run, request)
        case Delivered(links=links):
            pass
        case failed:
            await needs_person(run, failed.reason, hints=failed.hints, save=False)
    assessment = await run.finish.assess(links)
    if assessment.achieved:
        ending = await run.finish.complete(links, assessment)
        await run.planning.remember()
        await end(run, ending)
    verdict = assessment.verdict
    if assessment.claimed:  # the model says done; the record disagrees: reflect, revise
        revising = await run.review.disagreement(assessment.why_not(), verdict.problems)
        run.delivery.reopen()
        await revise(run, revising)
        return
    reason = "the goal was not achieved"
    if verdict.problems:
        reason += "; " + ends.disagreement(verdict)
    await needs_person(run, reason, verdict=verdict)


async def done(run: Run) -> None:
    await ends.announce(run.session)
    stored = run.state.outcome
    assert stored is not None
    raise Exit(ends.stored_outcome(stored))


HANDLERS: dict[Stage, Callable[[Run], Awaitable[None]]] = {
    Stage.PLAN: plan,
    Stage.WAIT: wait,
    Stage.EXECUTE: execute,
    Stage.REFLECT: reflect,
    Stage.REVISE: revision,
    Stage.DELIVER: deliver,
    Stage.DONE: done,
}


# --- the loop --------------------------------------------------------------------------------


async def save_work_after_crash(run: Run) -> None:
    try:
        await run.delivery.save_work()
    except Exception:  # the crash is what the worker reports; this is the best effort
        log.exception("task %s: the work was not pushed after a crash", run.session.ctx.task.id)


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
            try:
                while True:
                    if run.state.stage is not Stage.DONE:
                        await safe_point(run)
                    await tracing.stage(run.state.stage, HANDLERS[run.state.stage](run), Exit)
            except LLMUnavailable as exc:
                return await run.finish.outage(str(exc), now=self._clock())
            except (BudgetExceeded, LLMError) as exc:
                reason, hints = ends.trouble(exc)
                await needs_person(run, reason, ask_model=False, hints=hints)
        except Exit as end:
            return end.outcome
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
        load = functools.partial(ctx.store.load_checkpoint, ctx.task.id)
        data = await retry.persist(load, what="the checkpoint") if persist else None
        state = AgentState.from_dict(data) if data else AgentState()
        prompts = self._prompts or PromptLibrary()
        session = Session(
            ctx, state, prompts, clock=self._clock, monotonic=self._monotonic, persist=persist
        )
        cache = self._cache or PlanCache(ctx.store, ctx.settings.planning, clock=self._clock)
        return build(session, cache, self._clock)
