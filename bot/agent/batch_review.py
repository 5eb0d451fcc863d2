"""After a batch of actions: count failures, reflect when a trigger fires, act on it.

``after_batch`` updates the failure counters (the same failure after a revision, or
too many failures in a row, ends the task for a person), reflects on the record that
fired a trigger (failures first), and then revises the plan, goes on executing, or,
when the reflection saw the success criteria met, goes on to delivery. ``feedback``
reflects on what people said and revises the plan when the reflection asks for it.
"""

from __future__ import annotations

from bot.agent.answers import answer_block
from bot.agent.context import ProgressKind
from bot.agent.context_builder import tool_lines
from bot.agent.exits import NeedsPerson
from bot.agent.llm_calls import PhaseCaller
from bot.agent.ports import Recorder
from bot.agent.reflection import (
    Evaluation,
    ReflectionEngine,
    Revise,
    differs_from_expected,
    should_reflect,
)
from bot.agent.results import done_text, remaining_text
from bot.agent.state import ActionRecord, AgentState, Phase, Stage
from bot.config import PlanningSettings
from bot.tools.registry import ToolRegistry


def failure_signature(record: ActionRecord) -> str:
    """The tool and the first line of its error: "the same failure"."""
    first = (record.output.strip().splitlines() or [""])[0].strip().lower()
    return f"{record.tool}|{first[:200]}"


class BatchReview:
    def __init__(
        self,
        state: AgentState,
        recorder: Recorder,
        caller: PhaseCaller,
        settings: PlanningSettings,
        tools: ToolRegistry,
        revise: Revise,
    ) -> None:
        self.state = state
        self.recorder = recorder
        self.caller = caller
        self.settings = settings
        self.tools = tools
        self.revise = revise

    def engine(self) -> ReflectionEngine:
        plan = self.recorder.plan
        assert plan is not None
        return ReflectionEngine(
            self.caller,
            self.settings.reflection,
            plan.goal,
            remaining=remaining_text(plan, self.state.finished_keys()),
        )

    async def feedback(self) -> None:
        """Reflect on people's feedback; revise the plan when the reflection asks to."""
        recorder, state = self.recorder, self.state
        feedback, state.pending_feedback = state.pending_feedback, []
        await recorder.show(Phase.REFLECTION)
        engine = self.engine()
        evaluation = await engine.incorporate_human_feedback(
            feedback,
            done=done_text(list(state.records.values())),
            tools=tool_lines(self.tools.usable()),
        )
        recorder.record("reflection", action="human feedback", evaluation=evaluation.to_dict())
        suggestion = engine.suggest_revision(evaluation)
        if suggestion is None:
            await recorder.show(Phase.EXECUTION)
            await recorder.checkpoint()
            return
        text = "\n".join([await answer_block(str(f["author"]), str(f["body"])) for f in feedback])
        await self.revise(
            suggestion, issues=engine.identify_issues(evaluation), feedback=text, counts=False
        )

    def _account(self, records: list[ActionRecord]) -> str | None:
        """Update the failure counters; the reason to stop, if any."""
        state = self.state
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
        early = self.settings.execution.early_termination
        if early.enabled and state.consecutive_failures >= early.max_consecutive_failures:
            return f"{state.consecutive_failures} actions failed in a row"
        return None

    def _to_reflect(self, records: list[ActionRecord]) -> tuple[ActionRecord, str] | None:
        plan = self.recorder.plan
        settings = self.settings.reflection
        periodic = not (self.settings.auto_adjust_level and self.state.complexity == "simple")
        # failures first, then the latest result (a periodic look covers the whole batch)
        for record in sorted(reversed(records), key=lambda r: r.ok):
            action = plan.action(record.key) if plan else None
            differs = differs_from_expected(action, record, record.writes)
            trigger = should_reflect(
                settings,
                record,
                differs=differs,
                since_last=self.state.actions_since_reflection,
                periodic=periodic,
            )
            if trigger is not None:
                return record, trigger
        return None

    async def resume(self) -> None:
        """The results of a batch a stopped worker finished but did not reflect on."""
        state = self.state
        keys, state.batch = state.batch, []
        records = [state.records[k] for k in keys if k in state.records]
        finished = [record for record in records if record.finished]
        if not finished:
            self.recorder.to(Stage.EXECUTE)
            await self.recorder.checkpoint()
            return
        await self.after_batch(finished)

    async def after_batch(self, records: list[ActionRecord]) -> None:
        recorder = self.recorder
        self.state.batch = []  # saved with the next checkpoint, once acted on
        stop = self._account(records)
        if stop is not None:
            raise NeedsPerson(stop)
        chosen = self._to_reflect(records)
        if chosen is None:
            recorder.to(Stage.EXECUTE)
            await recorder.checkpoint()
            return
        record, trigger = chosen
        await recorder.show(Phase.REFLECTION)
        engine = self.engine()
        plan = recorder.plan
        evaluation = await engine.evaluate_action(
            plan.action(record.key) if plan else None, record, trigger=trigger
        )
        self.state.actions_since_reflection = 0
        await self._act_on(engine, evaluation)

    async def _act_on(self, engine: ReflectionEngine, evaluation: Evaluation) -> None:
        recorder = self.recorder
        recorder.record("reflection", action=evaluation.action, evaluation=evaluation.to_dict())
        if evaluation.failed or evaluation.plan_revision_needed:
            await recorder.milestone(
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
            await self.revise(suggestion, issues=engine.identify_issues(evaluation))
            return
        recorder.to(Stage.DELIVER if met else Stage.EXECUTE)
        await recorder.show(Phase.EXECUTION)
        await recorder.checkpoint()
