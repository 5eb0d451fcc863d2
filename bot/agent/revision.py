"""Plan revision within its limits (seed 004, 5 "計画修正プロセス" and 10.4).

``Reviser.revise`` applies a reflection's suggestion: the reflection's own
``updated_action_plan`` when it is valid, else a ``revision`` call. Revisions asked
for by failures, and by a ``/agent reject`` of a plan or revision (the plan failed a
person's review), count against ``max_revisions`` (reaching it asks for a person);
revisions that follow people's feedback comments do not (``counts=False``). With
``require_human_approval`` every revised plan waits for approval before it runs.
A revision that cannot go on ends the run: ``Exit``.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.agent.budget import compact_results
from bot.agent.context import ProgressKind
from bot.agent.context_builder import tool_lines
from bot.agent.exits import Exit
from bot.agent.finalise import Finisher
from bot.agent.plan_rules import pending_actions
from bot.agent.planning import RevisionRequest, RevisionResult
from bot.agent.planning_stage import PlanningStage
from bot.agent.reflection import RevisionSuggestion
from bot.agent.session import Session
from bot.agent.state import Phase, Stage, Waiting, WaitKind
from bot.agent.waiting import Waits
from bot.llm.tokens import count_tokens

REMAINING_LINES = 8


class Reviser:
    def __init__(
        self,
        session: Session,
        stage: PlanningStage,
        finisher: Finisher,
        waits: Waits,
    ) -> None:
        self.session = session
        self.stage = stage
        self.finisher = finisher
        self.waits = waits

    def remaining_text(self) -> str:
        plan = self.session.plan
        if plan is None:
            return ""
        pending = pending_actions(plan, self.session.state.finished_keys())
        lines = [f"- [{a.key}] {a.tool}: {a.purpose}" for a in pending[:REMAINING_LINES]]
        if len(pending) > REMAINING_LINES:
            lines.append(f"- ... {len(pending) - REMAINING_LINES} more")
        return "\n".join(lines) or "(nothing left)"

    def tools_text(self) -> str:
        return tool_lines(self.session.ctx.tools.usable())

    def done_text(self) -> str:
        records = list(self.session.state.records.values())
        return compact_results(records, budget_tokens=500, count=count_tokens)

    async def _new_plan(
        self, suggestion: RevisionSuggestion, issues: Sequence[str], feedback: str, number: int
    ) -> RevisionResult:
        session = self.session
        plan = session.plan
        assert plan is not None
        engine = self.stage.engine()
        done = session.state.done_tasks()
        if suggestion.updated_action_plan is not None:
            offered = {
                "reason": suggestion.reason,
                "changes": list(suggestion.changes),
                "updated_action_plan": suggestion.updated_action_plan,
            }
            result = engine.adopt(plan, offered, number=number, done=done)
            if result.plan is not None:
                return result
            session.record("plan_rejected", revision=number, problems=list(result.problems))
        request = RevisionRequest(
            reason=suggestion.reason, issues=issues, done=self.done_text(), feedback=feedback
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
        """Revise the plan and go on executing; raises ``Exit`` when the run ends."""
        session, state = self.session, self.session.state
        limit = session.planning.revision.max_revisions
        if counts and state.revisions >= limit:
            raise Exit(
                await self.finisher.intervene(
                    f"the plan was revised {state.revisions} times (planning.revision."
                    f"max_revisions is {limit}) and still needs changes: {suggestion.reason}"
                )
            )
        session.to(Stage.REVISE)
        await session.show(Phase.REVISION)
        number = state.plan_number + 1
        result = await self._new_plan(suggestion, issues, feedback, number)
        if result.plan is None:
            reason = "the plan could not be revised: " + "; ".join(result.problems)
            raise Exit(await self.finisher.intervene(reason))
        state.revisions += 1 if counts else 0
        state.plan_number = number
        state.consecutive_failures = 0
        session.set_plan(result.plan)
        reason = result.reason or suggestion.reason
        changes = list(result.changes or suggestion.changes)
        state.tried.append(f"revision {number}: {reason}")
        document = result.plan.to_document()
        session.record(
            "revision", number=number, counted=counts, reason=reason, changes=changes, plan=document
        )
        await session.emit(
            ProgressKind.REVISION,
            seq=number,
            number=state.revisions,
            limit=limit,
            reason=reason,
            changes=changes,
            requested_by_people=not counts,
            plan=document,
            statuses=session.statuses(),
        )
        if session.planning.revision.require_human_approval:
            await self.waits.request_approval(
                WaitKind.REVISION,
                f"revision {number} of the plan",
                self.remaining_text(),
                Waiting(WaitKind.REVISION, number=number),
            )
        session.to(Stage.EXECUTE)
        await session.show(Phase.EXECUTION)
        await session.checkpoint()
