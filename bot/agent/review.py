"""Review (docs/planning.md#reflection): after a batch, on people's feedback, and on a
completion the record does not bear out.

``after_batch`` updates the failure counters (the same failure after a revision, or too
many failures in a row, ends the task for a person), reflects on the record that fired
a trigger (failures first, ``should_reflect``), and says what comes next: revise the
plan, go on executing, or, when the reflection saw the success criteria met, deliver.
``feedback`` reflects on what people said. When the model cannot give a usable
evaluation (an invalid answer twice) of a failed action, the judgement is conservative
(#conservative-judgement): the plan needs revision. Of an action whose record says it
succeeded, the bot first gathers its own evidence (the file read back, the diff, the
exit status) and asks once more at the shallowest depth; when that cannot be judged
either, the task goes on when the evidence bears the result out, and otherwise asks the
author (``AskAuthor``) or revises, as ``planning.reflection.unjudged`` says: a weak
model's prose costs no revision. Every method returns what to do (``ReviewResult``);
the loop does it. In the open tool loop (``planning.enabled: false``) nothing is
reflected on: the model sees each result in its next step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot import tracing
from bot.agent.briefing import as_data, tool_lines
from bot.agent.people import answer_block
from bot.agent.revision import Revise, RevisionSuggestion
from bot.agent.session import Session
from bot.config import PlanningSettings, ReflectionSettings
from bot.llm.calls import PhaseCaller
from bot.record.evidence import done_text, remaining_text
from bot.record.history import HistoryKind, ReflectionStatus
from bot.record.judgement import (
    Evaluation,
    Trigger,
    Unjudged,
    conservative,
    evaluation_from,
    failure_signature,
    periodic_interval,
    should_reflect,
    unexpected_result,
)
from bot.record.plan import Goal, PlannedAction
from bot.record.state import ActionRecord, Feedback, Phase, Stage, Waiting
from bot.record.texts import judgement_text
from bot.run_events import CourseChanged, Reflected, WaitKind
from bot.text import clip
from bot.tools.inspect import read_back
from bot.untrusted import MAX_PERSON_CHARS, fence_off_loop

REFLECTION_OUTPUT_CHARS = 600
SHALLOWEST = "shallow"


@dataclass(frozen=True, slots=True)
class Continue:
    """No revision: go on in ``stage`` (None: stay), telling people the phase first."""

    stage: Stage | None = None
    show: bool = True


@dataclass(frozen=True, slots=True)
class GiveUp:
    """The run cannot go on: a person is needed."""

    reason: str


@dataclass(frozen=True, slots=True)
class AskAuthor:
    """Nobody could judge a result and the bot's own evidence does not bear it out: ask
    the author (the loop posts ``request`` and waits)."""

    request: Waiting


ReviewResult = Continue | Revise | GiveUp | AskAuthor


@dataclass
class ReflectionEngine:
    caller: PhaseCaller
    settings: ReflectionSettings
    goal: Goal
    remaining: str = ""
    extra_issues: list[str] = field(default_factory=list)

    async def evaluate_action(
        self,
        action: PlannedAction | None,
        record: ActionRecord,
        *,
        trigger: Trigger,
        unexpected: str = "",
        evidence: str = "",
        depth: str = "",
    ) -> Evaluation:
        """The model's evaluation of ``record``; ``unexpected``: why the result is not
        what the plan meant; ``evidence``: what the bot checked itself (a second look,
        at ``depth``)."""
        output = clip(record.summary or record.output, REFLECTION_OUTPUT_CHARS, note=" [...]")
        answer = await self.caller.ask(
            "reflection",
            "reflection",
            depth=depth or self.settings.depth,
            trigger=trigger.value,
            unexpected=unexpected,
            evidence=as_data(evidence),
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
        return evaluation_from(answer.data, record.key)

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
        return evaluation_from(answer.data, "human feedback")


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
        if state.open_loop:  # no plan to revise: the open loop's next step reads it
            state.open_notes += [
                await fence_off_loop(f.body, f"feedback by {f.author}", limit=MAX_PERSON_CHARS)
                for f in feedback
            ]
            return Continue()
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

    def _to_reflect(self, records: list[ActionRecord]) -> tuple[ActionRecord, Trigger, str] | None:
        """The record to reflect on, why, and what makes it unexpected ("" if nothing)."""
        plan, state = self.session.plan, self.state
        if state.open_loop:  # no plan to revise: the model sees the result in its next step
            return None
        interval = periodic_interval(self.settings, state.complexity)
        # failures first, then the latest result (a periodic look covers the whole batch)
        for record in sorted(reversed(records), key=lambda r: r.ok):
            action = plan.action(record.key) if plan else None
            unexpected = unexpected_result(action, record)
            trigger = should_reflect(
                self.settings.reflection,
                record,
                differs=bool(unexpected),
                since_last=state.actions_since_reflection,
                interval=interval,
            )
            if trigger is not None:
                return record, trigger, unexpected
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
        record, trigger, unexpected = chosen
        await session.show(Phase.REFLECTION)
        engine = self.engine()
        plan = session.plan
        action = plan.action(record.key) if plan else None
        with tracing.span("reflect", {"bot.reflection.trigger": trigger.value}) as span:
            evaluation = await engine.evaluate_action(
                action, record, trigger=trigger, unexpected=unexpected
            )
            span.update({"bot.tool": record.tool, "bot.reflection.status": evaluation.status.value})
        if evaluation.conservative and record.ok:
            return await self._unjudged(engine, action, record, trigger, unexpected)
        self.state.actions_since_reflection = 0
        result = await self._act_on(engine, evaluation)
        if unexpected and isinstance(result, Revise):
            await self._changed_course(f"revising the plan after {record.key}: {unexpected}")
        return result

    async def _unjudged(
        self,
        engine: ReflectionEngine,
        action: PlannedAction | None,
        record: ActionRecord,
        trigger: Trigger,
        unexpected: str,
    ) -> ReviewResult:
        """The model gave no readable evaluation of a result its record says succeeded
        (docs/planning.md#when-a-result-cannot-be-judged): gather the bot's own evidence,
        ask once more at the shallowest depth, then go on, ask the author, or revise."""
        self.state.actions_since_reflection = 0
        facts, holds = await self._own_evidence(record)
        again = await engine.evaluate_action(
            action, record, trigger=trigger, unexpected=unexpected,
            evidence="\n".join(facts), depth=SHALLOWEST,
        )  # fmt: skip
        if not again.conservative:
            return await self._act_on(engine, again)
        doubt = unexpected or ("" if holds else "the bot's own check does not bear it out")
        if not doubt:
            evaluation = Evaluation(
                record.key, ReflectionStatus.UNJUDGED, issues=tuple(facts),
                evaluation="the model could not judge the result; the record and the bot's "
                "own evidence show it succeeded: going on (the completion is still checked "
                "against the record)",
            )  # fmt: skip
            self.session.record(
                HistoryKind.REFLECTION, action=record.key, evaluation=evaluation.to_dict()
            )
            return Continue(Stage.EXECUTE)
        if Unjudged(self.settings.reflection.unjudged) is Unjudged.ASK:
            self.session.record(HistoryKind.REFLECTION, action=record.key, evaluation={
                "status": ReflectionStatus.UNJUDGED.value, "issues": [doubt, *facts],
                "evaluation": "nobody could judge the result: asking the author"})  # fmt: skip
            what = f"the result of {record.key} ({record.tool})"
            text = judgement_text(record, doubt, facts)
            return AskAuthor(Waiting(WaitKind.JUDGEMENT, what=what, text=text))
        return await self._act_on(engine, conservative(record.key))

    async def _own_evidence(self, record: ActionRecord) -> tuple[list[str], bool]:
        """What the bot can read itself of a successful result, and whether it bears the
        result out: the file read back and the diff, the exit status, the forge's commit."""
        facts: list[str] = []
        holds = True
        code = record.data.get("exit_code")
        if code is not None:
            facts.append(f"the command's exit status: {code}")
            holds = code == 0 and not record.data.get("timed_out")
        if record.data.get("sha"):
            facts.append(f"the forge reported commit {str(record.data['sha'])[:12]}")
        built = self.session.ctx.built
        if built is not None and record.writes and (built.workspace.path / ".git").is_dir():
            found, written = await read_back(built.workspace, record.tool, record.arguments)
            facts += found
            holds = holds and written
        if record.unchanged_paths or record.unexpected_paths:
            holds = False
        if not facts:
            facts.append(f"the tool reported success with {len(record.output)} characters")
        return facts, holds

    async def _changed_course(self, text: str) -> None:
        self.state.course.append(text)
        await self.session.emit(CourseChanged(reason=text))

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
