"""The execution loop (seed 004, 7.2 step 5 and 7.3): run, reflect, revise, repeat.

Between actions (the safe points) the loop reads what people said: stop and pause
end the run, approvals resolve what the task waits for, feedback reaches the next
reflection. After each batch of actions it counts failures, decides whether to
reflect, and revises the plan when the reflection asks for it, within
``max_revisions`` and without looping on the same failure.
"""

from __future__ import annotations

from bot.agent.actions import ActionRunner
from bot.agent.context import Outcome, ProgressKind
from bot.agent.delivery import Delivery
from bot.agent.finalise import Finisher
from bot.agent.plan import PlannedAction
from bot.agent.plan_rules import next_batch
from bot.agent.planning_stage import PlanningStage
from bot.agent.push_failure import DeliveryFailed
from bot.agent.reflection import (
    Evaluation,
    ReflectionEngine,
    RevisionSuggestion,
    differs_from_expected,
    should_reflect,
)
from bot.agent.revision import Reviser
from bot.agent.session import Session
from bot.agent.state import ActionRecord, Phase
from bot.agent.waiting import Rejection, Waits, answer_block
from bot.storage.base import TaskState


def failure_signature(record: ActionRecord) -> str:
    """The tool and the first line of its error: "the same failure" (seed 10.4)."""
    first = (record.output.strip().splitlines() or [""])[0].strip().lower()
    return f"{record.tool}|{first[:200]}"


class ExecutionLoop:
    def __init__(self, session: Session, stage: PlanningStage) -> None:
        self.session = session
        self.stage = stage
        self.runner = ActionRunner(session)
        self.finisher = Finisher(session)
        self.waits = Waits(session)
        self.reviser = Reviser(session, stage, self.finisher, self.waits.request_approval)

    # --- driving ---------------------------------------------------------------------------

    async def drive(self) -> Outcome:
        outcome = await self.safe_point()
        if outcome is not None:
            return outcome
        if self.session.plan is None:
            outcome = await self.stage.run()
            if outcome is not None:
                return outcome
        if self.stage.needs_plan_approval():
            return await self.waits.request_approval("plan", "the plan", self.waits.plan_details())
        return await self.execute()

    async def execute(self) -> Outcome:
        session = self.session
        await session.move(Phase.EXECUTION)
        while True:
            outcome = await self.safe_point()
            if outcome is not None:
                return outcome
            if session.state.pending_feedback:
                outcome = await self.feedback_point()
                if outcome is not None:
                    return outcome
                continue
            if session.state.unreflected:
                outcome = await self.resume_reflection()
                if outcome is not None:
                    return outcome
                continue
            plan = session.plan
            assert plan is not None
            batch = next_batch(
                plan,
                session.state.finished_keys(),
                max_parallel=session.planning.execution.max_parallel,
            )
            if session.state.early_done or not batch:
                return await self.finish()
            outcome = await self.run_batch(batch)
            if outcome is not None:
                return outcome

    async def run_batch(self, batch: list[PlannedAction]) -> Outcome | None:
        self.session.state.unreflected = [action.key for action in batch]
        outcomes = await self.runner.run_batch(batch)
        errors = [o.error for o in outcomes if o.error is not None]
        if errors:
            await self.session.checkpoint()
            raise errors[0]
        records = [o.record for o in outcomes if o.record is not None]
        outcome = await self.after_batch(records)
        if outcome is not None:
            return outcome
        approvals = [o.approval for o in outcomes if o.approval is not None]
        if approvals:
            return await self.waits.ask_tool_approval(approvals[0])
        return None

    async def finish(self) -> Outcome:
        try:
            links = await Delivery(self.session).deliver()
        except DeliveryFailed as exc:
            return await self.finisher.intervene(exc.reason, hints=exc.hints)
        shown = {k: v for k, v in links.items() if k != "report_path"}
        outcome = await self.finisher.complete(shown)
        if outcome.state is TaskState.DONE:
            await self.stage.remember()
        return outcome

    # --- safe points -------------------------------------------------------------------------

    async def safe_point(self) -> Outcome | None:
        """Stop, pause, waiting and budget checks between actions; rejections act here."""
        result = await self.waits.safe_point()
        if not isinstance(result, Rejection):
            return result
        if result.record is not None:
            return await self.after_batch([result.record])
        outcome = await self.reviser.revise(RevisionSuggestion(result.why), issues=[result.why])
        if outcome is None and self.stage.needs_plan_approval():  # /agent plan: show it again
            return await self.waits.request_approval("plan", "the plan", self.waits.plan_details())
        return outcome

    # --- reflection --------------------------------------------------------------------------

    def reflection_engine(self) -> ReflectionEngine:
        plan = self.session.plan
        assert plan is not None
        return ReflectionEngine(
            self.session.caller,
            self.session.planning.reflection,
            plan.goal,
            remaining=self.reviser.remaining_text(),
        )

    async def feedback_point(self) -> Outcome | None:
        session, state = self.session, self.session.state
        feedback, state.pending_feedback = state.pending_feedback, []
        await session.move(Phase.REFLECTION)
        engine = self.reflection_engine()
        evaluation = await engine.incorporate_human_feedback(
            feedback, done=self.reviser.done_text(), tools=self.reviser.tools_text()
        )
        session.record("reflection", action="human feedback", evaluation=evaluation.to_dict())
        suggestion = engine.suggest_revision(evaluation)
        if suggestion is None:
            await session.move(Phase.EXECUTION)
            await session.checkpoint()
            return None
        text = "\n".join(answer_block(str(f["author"]), str(f["body"])) for f in feedback)
        return await self.reviser.revise(
            suggestion, issues=engine.identify_issues(evaluation), feedback=text, counts=False
        )

    def _account(self, records: list[ActionRecord]) -> str | None:
        """Update the failure counters; the reason to stop, if any."""
        state = self.session.state
        for record in records:
            state.actions_since_reflection += 1
            if record.ok:
                state.consecutive_failures = 0
                continue
            state.consecutive_failures += 1
            signature = failure_signature(record)
            first_seen = state.failure_signatures.setdefault(signature, state.plan_number)
            if first_seen < state.plan_number:
                detail = record.output[:200]
                return f"the same failure repeated after a plan revision: {record.tool}: {detail}"
        early = self.session.planning.execution.early_termination
        if early.enabled and state.consecutive_failures >= early.max_consecutive_failures:
            return f"{state.consecutive_failures} actions failed in a row"
        return None

    def _to_reflect(self, records: list[ActionRecord]) -> tuple[ActionRecord, str] | None:
        session = self.session
        plan = session.plan
        settings = session.planning.reflection
        periodic = not (session.planning.auto_adjust_level and session.state.complexity == "simple")
        # failures first, then the latest result (a periodic look covers the whole batch)
        for record in sorted(reversed(records), key=lambda r: r.ok):
            action = plan.action(record.key) if plan else None
            differs = differs_from_expected(action, record, record.writes)
            trigger = should_reflect(
                settings,
                record,
                differs=differs,
                since_last=session.state.actions_since_reflection,
                periodic=periodic,
            )
            if trigger is not None:
                return record, trigger
        return None

    async def resume_reflection(self) -> Outcome | None:
        """The results of a batch a stopped worker finished but did not reflect on."""
        state = self.session.state
        keys, state.unreflected = state.unreflected, []
        records = [state.records[k] for k in keys if k in state.records]
        finished = [record for record in records if record.finished]
        if not finished:
            await self.session.checkpoint()
            return None
        return await self.after_batch(finished)

    async def after_batch(self, records: list[ActionRecord]) -> Outcome | None:
        session = self.session
        session.state.unreflected = []  # saved with the next checkpoint, once acted on
        stop = self._account(records)
        if stop is not None:
            return await self.finisher.intervene(stop)
        chosen = self._to_reflect(records)
        if chosen is None:
            await session.checkpoint()
            return None
        record, trigger = chosen
        await session.move(Phase.REFLECTION)
        engine = self.reflection_engine()
        plan = session.plan
        evaluation = await engine.evaluate_action(
            plan.action(record.key) if plan else None, record, trigger=trigger
        )
        session.state.actions_since_reflection = 0
        return await self._act_on(engine, evaluation)

    async def _act_on(self, engine: ReflectionEngine, evaluation: Evaluation) -> Outcome | None:
        session = self.session
        session.record("reflection", action=evaluation.action, evaluation=evaluation.to_dict())
        if evaluation.failed or evaluation.plan_revision_needed:
            await session.milestone(
                ProgressKind.REFLECTION,
                action=evaluation.action,
                status=evaluation.status,
                evaluation=evaluation.evaluation,
                issues=engine.identify_issues(evaluation),
                plan_revision_needed=evaluation.plan_revision_needed,
            )
        if evaluation.success_criteria_met and not evaluation.failed:
            session.state.early_done = True
        suggestion = engine.suggest_revision(evaluation)
        if suggestion is not None and not session.state.early_done:
            return await self.reviser.revise(suggestion, issues=engine.identify_issues(evaluation))
        await session.move(Phase.EXECUTION)
        await session.checkpoint()
        return None
