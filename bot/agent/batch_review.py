"""After a batch of actions: count failures, reflect when a trigger fires, act on it.

``after_batch`` updates the failure counters (the same failure after a revision, or
too many failures in a row, ends the task for a person), reflects on the record that
fired a trigger (failures first), and then revises the plan, goes on executing, or,
when the reflection saw the success criteria met, goes on to delivery. ``feedback``
reflects on what people said and revises the plan when the reflection asks for it.
"""

from __future__ import annotations

from bot.agent.context import ProgressKind
from bot.agent.exits import Exit
from bot.agent.finalise import Finisher
from bot.agent.reflection import (
    Evaluation,
    ReflectionEngine,
    differs_from_expected,
    should_reflect,
)
from bot.agent.revision import Reviser
from bot.agent.session import Session
from bot.agent.state import ActionRecord, Phase, Stage
from bot.agent.waiting import answer_block


def failure_signature(record: ActionRecord) -> str:
    """The tool and the first line of its error: "the same failure"."""
    first = (record.output.strip().splitlines() or [""])[0].strip().lower()
    return f"{record.tool}|{first[:200]}"


class BatchReview:
    def __init__(self, session: Session, reviser: Reviser, finisher: Finisher) -> None:
        self.session = session
        self.reviser = reviser
        self.finisher = finisher

    def engine(self) -> ReflectionEngine:
        plan = self.session.plan
        assert plan is not None
        return ReflectionEngine(
            self.session.caller,
            self.session.planning.reflection,
            plan.goal,
            remaining=self.reviser.remaining_text(),
        )

    async def feedback(self) -> None:
        """Reflect on people's feedback; revise the plan when the reflection asks to."""
        session, state = self.session, self.session.state
        feedback, state.pending_feedback = state.pending_feedback, []
        await session.show(Phase.REFLECTION)
        engine = self.engine()
        evaluation = await engine.incorporate_human_feedback(
            feedback, done=self.reviser.done_text(), tools=self.reviser.tools_text()
        )
        session.record("reflection", action="human feedback", evaluation=evaluation.to_dict())
        suggestion = engine.suggest_revision(evaluation)
        if suggestion is None:
            await session.show(Phase.EXECUTION)
            await session.checkpoint()
            return
        text = "\n".join(answer_block(str(f["author"]), str(f["body"])) for f in feedback)
        await self.reviser.revise(
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

    async def resume(self) -> None:
        """The results of a batch a stopped worker finished but did not reflect on."""
        state = self.session.state
        keys, state.batch = state.batch, []
        records = [state.records[k] for k in keys if k in state.records]
        finished = [record for record in records if record.finished]
        if not finished:
            self.session.to(Stage.EXECUTE)
            await self.session.checkpoint()
            return
        await self.after_batch(finished)

    async def after_batch(self, records: list[ActionRecord]) -> None:
        session = self.session
        session.state.batch = []  # saved with the next checkpoint, once acted on
        stop = self._account(records)
        if stop is not None:
            raise Exit(await self.finisher.intervene(stop))
        chosen = self._to_reflect(records)
        if chosen is None:
            session.to(Stage.EXECUTE)
            await session.checkpoint()
            return
        record, trigger = chosen
        await session.show(Phase.REFLECTION)
        engine = self.engine()
        plan = session.plan
        evaluation = await engine.evaluate_action(
            plan.action(record.key) if plan else None, record, trigger=trigger
        )
        session.state.actions_since_reflection = 0
        await self._act_on(engine, evaluation)

    async def _act_on(self, engine: ReflectionEngine, evaluation: Evaluation) -> None:
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
        met = evaluation.success_criteria_met and not evaluation.failed
        suggestion = engine.suggest_revision(evaluation)
        if suggestion is not None and not met:
            await self.reviser.revise(suggestion, issues=engine.identify_issues(evaluation))
            return
        session.to(Stage.DELIVER if met else Stage.EXECUTE)
        await session.show(Phase.EXECUTION)
        await session.checkpoint()
