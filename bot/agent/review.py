"""Review (docs/planning.md#reflection): after a batch, on people's feedback, and on a
completion the record does not bear out.

``after_batch`` updates the failure counters (the same failure after a revision, or too
many failures in a row, ends the task for a person), reflects on the record that fired
a trigger (failures first, ``should_reflect``), and says what comes next: revise the
plan, go on executing, or, when the reflection saw the success criteria met, deliver.
``feedback`` reflects on what people said. When the model cannot give a usable
evaluation (an invalid answer twice) the judgement is conservative
(#conservative-judgement): the action failed and the plan needs revision. Every method
returns what to do (``ReviewResult``); the loop does it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot import tracing
from bot.agent.briefing import as_data, tool_lines
from bot.agent.people import answer_block
from bot.agent.revision import Revise, RevisionSuggestion
from bot.agent.session import Session
from bot.config import PlanningSettings, ReflectionSettings
from bot.llm.calls import PhaseCaller
from bot.record.evidence import done_text, remaining_text
from bot.record.history import HistoryKind, ReflectionStatus
from bot.record.plan import Complexity, Goal, PlannedAction
from bot.record.state import ActionRecord, Feedback, Phase, Stage
from bot.run_events import Reflected
from bot.text import clip
from bot.untrusted import MAX_PERSON_CHARS, fence_off_loop

REFLECTION_OUTPUT_CHARS = 600


class Trigger(StrEnum):
    """Why a result is reflected on (the reflection prompt's ``trigger``)."""

    ERROR = "error"
    UNEXPECTED = "unexpected"
    PERIODIC = "periodic"


@dataclass(frozen=True, slots=True)
class Evaluation:
    action: str
    status: ReflectionStatus
    evaluation: str = ""
    issues: tuple[str, ...] = ()
    plan_revision_needed: bool = False
    plan_revision: dict[str, Any] | None = None
    success_criteria_met: bool = False
    conservative: bool = False

    @property
    def failed(self) -> bool:
        return self.status is not ReflectionStatus.SUCCESS

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "status": self.status.value,
            "evaluation": self.evaluation,
            "issues": list(self.issues),
            "plan_revision_needed": self.plan_revision_needed,
            "success_criteria_met": self.success_criteria_met,
            "conservative": self.conservative,
        }


@dataclass(frozen=True, slots=True)
class Continue:
    """No revision: go on in ``stage`` (None: stay), telling people the phase first."""

    stage: Stage | None = None
    show: bool = True


@dataclass(frozen=True, slots=True)
class GiveUp:
    """The run cannot go on: a person is needed."""

    reason: str


ReviewResult = Continue | Revise | GiveUp


def differs_from_expected(action: PlannedAction | None, record: ActionRecord, writes: bool) -> bool:
    """A successful result that cannot be what the plan expected: a write that changed
    nothing, or an empty answer where an outcome was expected."""
    if not record.ok or action is None:
        return False
    if writes and not record.changed:
        return True
    return bool(action.expected_outcome) and not record.output.strip()


def should_reflect(
    settings: ReflectionSettings,
    record: ActionRecord,
    *,
    differs: bool,
    since_last: int,
    periodic: bool = True,
) -> Trigger | None:
    """Why to reflect on ``record`` now, or None."""
    if not settings.enabled:
        return None
    if not record.ok:
        return Trigger.ERROR if settings.trigger_on_error else None
    if differs:
        return Trigger.UNEXPECTED
    interval = settings.trigger_interval
    if periodic and interval > 0 and since_last >= interval:
        return Trigger.PERIODIC
    return None


def _status(value: object) -> ReflectionStatus:
    try:
        return ReflectionStatus(str(value))
    except ValueError:  # the schema allows no other status; never a crash
        return ReflectionStatus.FAILURE


def _evaluation_from(data: Mapping[str, Any] | None, action: str) -> Evaluation:
    if data is None:
        return Evaluation(
            action=action,
            status=ReflectionStatus.FAILURE,
            evaluation="the result could not be evaluated (no valid reflection); "
            "treated as a failure",
            issues=("evaluation impossible",),
            plan_revision_needed=True,
            conservative=True,
        )
    reflection = data.get("reflection") or {}
    revision = data.get("plan_revision")
    return Evaluation(
        action=action,
        status=_status(reflection.get("status", ReflectionStatus.FAILURE)),
        evaluation=str(reflection.get("evaluation") or reflection.get("root_cause_analysis", "")),
        issues=tuple(str(i) for i in reflection.get("issues_identified") or ()),
        plan_revision_needed=bool(reflection.get("plan_revision_needed", False)),
        plan_revision=dict(revision) if isinstance(revision, Mapping) else None,
        success_criteria_met=reflection.get("success_criteria_met") is True,
    )


@dataclass
class ReflectionEngine:
    caller: PhaseCaller
    settings: ReflectionSettings
    goal: Goal
    remaining: str = ""
    extra_issues: list[str] = field(default_factory=list)

    async def evaluate_action(
        self, action: PlannedAction | None, record: ActionRecord, *, trigger: Trigger
    ) -> Evaluation:
        output = clip(record.summary or record.output, REFLECTION_OUTPUT_CHARS, note=" [...]")
        answer = await self.caller.ask(
            "reflection",
            "reflection",
            depth=self.settings.depth,
            trigger=trigger.value,
            goal=self.goal,
            key=record.key,
            tool=record.tool,
            purpose=action.purpose if action else "",
            expected=action.expected_outcome if action else "",
            fallback=action.fallback_strategy if action else "",
            status="succeeded" if record.ok else "failed",
            output=as_data(output),
            remaining=self.remaining,
        )
        return _evaluation_from(answer.data, record.key)

    def identify_issues(self, evaluation: Evaluation) -> list[str]:
        issues = list(evaluation.issues)
        if evaluation.failed and not issues and evaluation.evaluation:
            issues.append(evaluation.evaluation)
        return issues + [i for i in self.extra_issues if i not in issues]

    def suggest_revision(self, evaluation: Evaluation) -> RevisionSuggestion | None:
        """What the reflection proposes to change, when it asks for a revision."""
        if not evaluation.plan_revision_needed:
            return None
        revision = evaluation.plan_revision or {}
        issues = self.identify_issues(evaluation)
        reason = str(revision.get("reason") or "; ".join(issues) or evaluation.evaluation)
        updated = revision.get("updated_action_plan")
        return RevisionSuggestion(
            reason=reason,
            changes=tuple(revision.get("changes") or ()),
            updated_action_plan=dict(updated) if isinstance(updated, Mapping) else None,
        )

    async def incorporate_human_feedback(
        self, feedback: Sequence[Feedback], *, done: str, tools: str
    ) -> Evaluation:
        """What people said, analysed against the plan (may ask for a revision)."""
        blocks = [
            await fence_off_loop(f.body, f"feedback by {f.author}", limit=MAX_PERSON_CHARS)
            for f in feedback
        ]
        answer = await self.caller.ask(
            "human_feedback",
            "reflection",
            goal=self.goal,
            feedback="\n".join(blocks),
            done=done,
            remaining=self.remaining,
            tools=tools,
        )
        if answer.data is None:
            # Unreadable analysis: people asked for something, so revise with their words.
            return Evaluation(
                action="human feedback",
                status=ReflectionStatus.PARTIAL,
                evaluation="the feedback could not be analysed; revising the plan with it",
                issues=tuple(f.body[:200] for f in feedback),
                plan_revision_needed=True,
                conservative=True,
            )
        return _evaluation_from(answer.data, "human feedback")


def failure_signature(record: ActionRecord) -> str:
    """The tool and the first line of its error: "the same failure"."""
    first = (record.output.strip().splitlines() or [""])[0].strip().lower()
    return f"{record.tool}|{first[:200]}"


class Review:
    def __init__(self, session: Session, settings: PlanningSettings) -> None:
        self.session = session
        self.state = session.state
        self.settings = settings

    def engine(self) -> ReflectionEngine:
        plan = self.session.plan
        assert plan is not None
        return ReflectionEngine(
            self.session.caller,
            self.settings.reflection,
            plan.goal,
            remaining=remaining_text(plan, self.state.finished_keys()),
        )

    async def feedback(self) -> ReviewResult:
        """Reflect on people's feedback; revise the plan when the reflection asks to."""
        session, state = self.session, self.state
        feedback, state.pending_feedback = state.pending_feedback, []
        await session.show(Phase.REFLECTION)
        engine = self.engine()
        with tracing.span("reflect", {"bot.reflection.trigger": "human_feedback"}) as span:
            evaluation = await engine.incorporate_human_feedback(
                feedback,
                done=done_text(list(state.records.values())),
                tools=tool_lines(session.ctx.tools.usable()),
            )
            span.set("bot.reflection.status", evaluation.status.value)
        session.record(
            HistoryKind.REFLECTION, action="human feedback", evaluation=evaluation.to_dict()
        )
        suggestion = engine.suggest_revision(evaluation)
        if suggestion is None:
            return Continue()
        text = "\n".join([await answer_block(f.author, f.body) for f in feedback])
        issues = engine.identify_issues(evaluation)
        return Revise(suggestion, issues=issues, feedback=text, counts=False)

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

    def _to_reflect(self, records: list[ActionRecord]) -> tuple[ActionRecord, Trigger] | None:
        plan = self.session.plan
        settings = self.settings.reflection
        simple = self.state.complexity is Complexity.SIMPLE
        periodic = not (self.settings.auto_adjust_level and simple)
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

    def resume(self) -> list[ActionRecord]:
        """The finished results of a batch a stopped worker ran but did not reflect on."""
        state = self.state
        keys, state.batch = state.batch, []
        records = [state.records[k] for k in keys if k in state.records]
        return [record for record in records if record.finished]

    async def after_batch(self, records: list[ActionRecord]) -> ReviewResult:
        session = self.session
        self.state.batch = []  # saved with the next checkpoint, once acted on
        stop = self._account(records)
        if stop is not None:
            return GiveUp(stop)
        chosen = self._to_reflect(records)
        if chosen is None:
            return Continue(Stage.EXECUTE, show=False)
        record, trigger = chosen
        await session.show(Phase.REFLECTION)
        engine = self.engine()
        plan = session.plan
        with tracing.span("reflect", {"bot.reflection.trigger": trigger.value}) as span:
            evaluation = await engine.evaluate_action(
                plan.action(record.key) if plan else None, record, trigger=trigger
            )
            span.update({"bot.tool": record.tool, "bot.reflection.status": evaluation.status.value})
        self.state.actions_since_reflection = 0
        return await self._act_on(engine, evaluation)

    async def _act_on(self, engine: ReflectionEngine, evaluation: Evaluation) -> ReviewResult:
        session = self.session
        session.record(
            HistoryKind.REFLECTION, action=evaluation.action, evaluation=evaluation.to_dict()
        )
        if evaluation.failed or evaluation.plan_revision_needed:
            await session.milestone(
                Reflected(
                    action=evaluation.action,
                    status=evaluation.status.value,
                    evaluation=evaluation.evaluation,
                    issues=engine.identify_issues(evaluation),
                    plan_revision_needed=evaluation.plan_revision_needed,
                )
            )
        met = evaluation.success_criteria_met and not evaluation.failed
        suggestion = engine.suggest_revision(evaluation)
        if suggestion is not None and not met:
            return Revise(suggestion, issues=engine.identify_issues(evaluation))
        return Continue(Stage.DELIVER if met else Stage.EXECUTE)

    async def disagreement(self, why: str, problems: Sequence[str]) -> Revise:
        """The model says the goal is achieved and the record disagrees: a reflection on
        the completion, and a revision with what stands against the claim."""
        issues = list(problems)
        status = ReflectionStatus.FAILURE
        await self.session.milestone(
            Reflected(action="completion", status=status.value, evaluation=why, issues=issues)
        )
        evaluation = {"status": status.value, "evaluation": why, "issues": issues,
                      "plan_revision_needed": True}  # fmt: skip
        self.session.record(HistoryKind.REFLECTION, action="completion", evaluation=evaluation)
        return Revise(RevisionSuggestion(why), issues=issues)
