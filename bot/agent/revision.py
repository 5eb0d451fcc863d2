"""Plan revision within its limits (docs/planning.md#revision, #revision-limits).

``Reviser.revise`` applies a reflection's suggestion: the reflection's own
``updated_action_plan`` when it is valid, else a ``revision`` call. Revisions asked
for by failures, and by a ``/agent reject`` of a plan or revision (the plan failed a
person's review), count against ``max_revisions`` (reaching it asks for a person);
revisions that follow people's feedback comments do not (``counts=False``). With
``require_human_approval`` (or after ``/agent plan``) every revised plan waits for its own
approval before it runs: the loop asks (``Waits.ensure_plan_approved``).
A revision that cannot go on ends the run: ``NeedsPerson``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.agent.context import ProgressKind
from bot.agent.exits import NeedsPerson
from bot.agent.plan import PlanDocument
from bot.agent.planning import PlanningEngine, RevisionRequest, RevisionResult
from bot.agent.ports import Recorder
from bot.agent.reflection import RevisionSuggestion
from bot.agent.results import done_text, remaining_text
from bot.agent.state import ActionRecord, ActionStatus, AgentState, Phase, Stage
from bot.config import RevisionSettings


def failed_fallbacks(plan: PlanDocument, records: Sequence[ActionRecord]) -> list[str]:
    """The plan's ``fallback_strategy`` of each action that failed, for the revision."""
    out = []
    for record in records:
        action = plan.action(record.key)
        if record.status is ActionStatus.FAILED and action and action.fallback_strategy:
            out.append(f"[{record.key}] {action.fallback_strategy}")
    return out


class Reviser:
    def __init__(
        self,
        state: AgentState,
        recorder: Recorder,
        settings: RevisionSettings,
        engine: Callable[[], PlanningEngine],
    ) -> None:
        self.state = state
        self.recorder = recorder
        self.settings = settings
        self.engine = engine

    def remaining_text(self) -> str:
        return remaining_text(self.recorder.plan, self.state.finished_keys())

    async def _new_plan(
        self, suggestion: RevisionSuggestion, issues: Sequence[str], feedback: str, number: int
    ) -> RevisionResult:
        plan = self.recorder.plan
        assert plan is not None
        engine = self.engine()
        done = self.state.done_tasks()
        if suggestion.updated_action_plan is not None:
            offered = {
                "reason": suggestion.reason,
                "changes": list(suggestion.changes),
                "updated_action_plan": suggestion.updated_action_plan,
            }
            result = engine.adopt(plan, offered, number=number, done=done)
            if result.plan is not None:
                return result
            self.recorder.record("plan_rejected", revision=number, problems=list(result.problems))
        records = list(self.state.records.values())
        request = RevisionRequest(
            reason=suggestion.reason,
            issues=issues,
            done=done_text(records),
            feedback=feedback,
            fallbacks=failed_fallbacks(plan, records),
        )
        return await engine.revise_plan(
            plan, request, number=number, done=done, remaining=self.remaining_text()
        )

    async def revise(
        self,
        suggestion: RevisionSuggestion,
        *,
        issues: Sequence[str] = (),
        feedback: str = "",
        counts: bool = True,
    ) -> None:
        """Revise the plan and go on executing; raises ``NeedsPerson`` when it cannot, and
        ``Exit`` when the new plan waits for approval."""
        recorder, state = self.recorder, self.state
        limit = self.settings.max_revisions
        if counts and state.revisions >= limit:
            raise NeedsPerson(
                f"the plan was revised {state.revisions} times (planning.revision."
                f"max_revisions is {limit}) and still needs changes: {suggestion.reason}"
            )
        recorder.to(Stage.REVISE)
        await recorder.show(Phase.REVISION)
        number = state.plan_number + 1
        result = await self._new_plan(suggestion, issues, feedback, number)
        if result.plan is None:
            reason = "the plan could not be revised: " + "; ".join(result.problems)
            raise NeedsPerson(reason)
        state.revisions += 1 if counts else 0
        state.plan_number = number
        state.consecutive_failures = 0
        recorder.set_plan(result.plan)
        reason = result.reason or suggestion.reason
        changes = list(result.changes or suggestion.changes)
        state.tried.append(f"revision {number}: {reason}")
        document = result.plan.to_document()
        recorder.record(
            "revision", number=number, counted=counts, reason=reason, changes=changes, plan=document
        )
        await recorder.emit(
            ProgressKind.REVISION,
            seq=number,
            number=state.revisions,
            limit=limit,
            reason=reason,
            changes=changes,
            requested_by_people=not counts,
            plan=document,
            statuses=recorder.statuses(),
        )
        recorder.to(Stage.EXECUTE)  # where a plan that needs approval waits for it
        await recorder.show(Phase.EXECUTION)
        await recorder.checkpoint()
