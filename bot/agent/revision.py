"""Plan revision within its limits (docs/planning.md#revision, #revision-limits).

``Reviser.revise`` applies a reflection's suggestion: the reflection's own
``updated_action_plan`` when it is valid, else a ``revision`` call that asks for a new
action plan for the remaining work (re-asked once when the answer or the plan is
unusable). Revisions asked for by failures, and by a ``/agent reject`` of a plan or
revision (the plan failed a person's review), count against ``max_revisions`` (reaching
it asks for a person: ``over_limit``); revisions that follow people's feedback comments
do not (``counts=False``). With ``require_human_approval`` (or after ``/agent plan``)
every revised plan waits for its own approval before it runs: the loop asks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot import tracing
from bot.agent.planning import PlanningEngine, planning_engine, validated
from bot.agent.session import Session
from bot.config import RevisionSettings
from bot.record.evidence import done_text, remaining_text
from bot.record.history import HistoryKind
from bot.record.plan import PlanDocument, PlanFormatError, revised_plan
from bot.record.state import ActionRecord, ActionStatus
from bot.run_events import Revised


@dataclass(frozen=True, slots=True)
class RevisionSuggestion:
    reason: str
    changes: tuple[Any, ...] = ()
    updated_action_plan: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Revise:
    """Revise the plan as ``suggestion`` says (the loop does it)."""

    suggestion: RevisionSuggestion
    issues: Sequence[str] = ()
    feedback: str = ""
    counts: bool = True


@dataclass(frozen=True, slots=True)
class RevisionRequest:
    reason: str
    issues: Sequence[str] = ()
    done: str = ""
    feedback: str = ""
    fallbacks: Sequence[str] = ()  # the plan's fallback_strategy of each failed action


@dataclass(frozen=True, slots=True)
class RevisionResult:
    plan: PlanDocument | None
    reason: str = ""
    changes: tuple[Any, ...] = ()
    problems: tuple[str, ...] = field(default=())


def adopt(
    engine: PlanningEngine,
    current: PlanDocument,
    plan_revision: Mapping[str, Any],
    *,
    number: int,
    done: Iterable[str],
) -> RevisionResult:
    """A revision's ``updated_action_plan`` applied to ``current`` and validated."""
    updated = plan_revision.get("updated_action_plan")
    reason = str(plan_revision.get("reason", ""))
    changes = tuple(plan_revision.get("changes") or ())
    if not isinstance(updated, Mapping):
        return RevisionResult(None, reason, changes, ("the revision has no updated_action_plan",))
    try:
        plan = revised_plan(current, updated, revision=number, done_tasks=done)
    except PlanFormatError as exc:
        return RevisionResult(None, reason, changes, (str(exc),))
    accepted, problems = validated(plan, engine.check_tool, engine.planning)
    return RevisionResult(accepted, reason, changes, tuple(problems))


async def revise_plan(
    engine: PlanningEngine,
    current: PlanDocument,
    request: RevisionRequest,
    *,
    number: int,
    done: Iterable[str],
    remaining: str,
) -> RevisionResult:
    """A new action plan for the remaining work; one re-ask when it is unusable."""
    done_tasks = list(done)
    rejected: Sequence[str] = ()
    result = RevisionResult(None, request.reason)
    for _attempt in (1, 2):
        answer = await engine.caller.ask(
            "revision",
            "reflection",
            goal=current.goal,
            number=number,
            limit=engine.planning.revision.max_revisions,
            reason=request.reason,
            issues=list(request.issues),
            fallbacks=list(request.fallbacks),
            feedback=request.feedback,
            done=request.done,
            remaining=remaining,
            tools=engine.tools,
            rejected=list(rejected),
        )
        if answer.data is None:
            rejected = [answer.error or "the answer was not a valid reflection document"]
            result = RevisionResult(None, request.reason, (), tuple(rejected))
            continue
        revision = answer.data.get("plan_revision") or {}
        result = adopt(engine, current, revision, number=number, done=done_tasks)
        if result.plan is not None:
            return result
        rejected = result.problems
    return result


def failed_fallbacks(plan: PlanDocument, records: Sequence[ActionRecord]) -> list[str]:
    """The plan's ``fallback_strategy`` of each action that failed, for the revision."""
    out = []
    for record in records:
        action = plan.action(record.key)
        if record.status is ActionStatus.FAILED and action and action.fallback_strategy:
            out.append(f"[{record.key}] {action.fallback_strategy}")
    return out


class Reviser:
    def __init__(self, session: Session, settings: RevisionSettings) -> None:
        self.session = session
        self.state = session.state
        self.settings = settings

    def over_limit(self, revise: Revise) -> str | None:
        """Why a counted revision may not happen (the limit is reached), or None."""
        limit, done = self.settings.max_revisions, self.state.revisions
        if not revise.counts or done < limit:
            return None
        return (
            f"the plan was revised {done} times (planning.revision."
            f"max_revisions is {limit}) and still needs changes: {revise.suggestion.reason}"
        )

    async def _new_plan(self, revise: Revise, number: int) -> RevisionResult:
        session, suggestion = self.session, revise.suggestion
        plan = session.plan
        assert plan is not None
        ctx = session.ctx
        engine = planning_engine(session.caller, ctx.settings.planning, ctx.tools)
        done = self.state.done_tasks()
        if suggestion.updated_action_plan is not None:
            offered = {
                "reason": suggestion.reason,
                "changes": list(suggestion.changes),
                "updated_action_plan": suggestion.updated_action_plan,
            }
            result = adopt(engine, plan, offered, number=number, done=done)
            if result.plan is not None:
                return result
            problems = list(result.problems)
            session.record(HistoryKind.PLAN_REJECTED, revision=number, problems=problems)
        records = list(self.state.records.values())
        request = RevisionRequest(
            reason=suggestion.reason,
            issues=revise.issues,
            done=done_text(records),
            feedback=revise.feedback,
            fallbacks=failed_fallbacks(plan, records),
        )
        remaining = remaining_text(plan, self.state.finished_keys())
        return await revise_plan(
            engine, plan, request, number=number, done=done, remaining=remaining
        )

    async def _tell_open_loop(self, revise: Revise, number: int) -> None:
        """The open tool loop has no plan to revise: its next step is told why, and the
        revision counts like any other (docs/planning.md#without-planning)."""
        session, state = self.session, self.state
        reason = revise.suggestion.reason
        issues = "".join(f"\n- {issue}" for issue in revise.issues)
        state.open_notes.append(f"The work is not done yet: {reason}{issues}")
        state.revisions += 1 if revise.counts else 0
        state.plan_number = number
        state.consecutive_failures = 0
        state.tried.append(f"revision {number}: {reason}")
        session.record(HistoryKind.REVISION, number=number, counted=revise.counts,
                       reason=reason, changes=[], plan=state.plan)  # fmt: skip
        await session.emit(
            Revised(seq=number, number=state.revisions, limit=self.settings.max_revisions,
                    reason=reason, requested_by_people=not revise.counts)
        )  # fmt: skip

    async def revise(self, revise: Revise) -> str | None:
        """Make, keep and announce the revised plan (the loop has moved the task to
        REVISE); why it could not be revised, or None."""
        session, state = self.session, self.state
        number = state.plan_number + 1
        if state.open_loop:
            await self._tell_open_loop(revise, number)
            return None
        with tracing.span("revise", {"bot.revision.number": number}) as span:
            result = await self._new_plan(revise, number)
            span.set("bot.revision.made", result.plan is not None)
        if result.plan is None:
            return "the plan could not be revised: " + "; ".join(result.problems)
        counts = revise.counts
        state.revisions += 1 if counts else 0
        state.plan_number = number
        state.consecutive_failures = 0
        session.set_plan(result.plan)
        reason = result.reason or revise.suggestion.reason
        changes = list(result.changes or revise.suggestion.changes)
        state.tried.append(f"revision {number}: {reason}")
        document = result.plan.to_document()
        session.record(HistoryKind.REVISION, number=number, counted=counts, reason=reason,
                       changes=changes, plan=document)  # fmt: skip
        await session.emit(
            Revised(
                seq=number,
                number=state.revisions,
                limit=self.settings.max_revisions,
                reason=reason,
                changes=changes,
                requested_by_people=not counts,
                plan=document,
                statuses=session.statuses(),
            )
        )
        return None
