"""ReflectionEngine (docs/planning.md#reflection): evaluate results, find issues, suggest revisions,
and take in human feedback.

When the model cannot give a usable evaluation (an invalid answer twice) the
judgement is conservative (#conservative-judgement): the action is treated as a failure and the
plan as needing revision. ``should_reflect`` is the pure decision of when to reflect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.agent.context_builder import as_data
from bot.agent.llm_calls import PhaseCaller
from bot.agent.plan import Goal, PlannedAction
from bot.agent.state import ActionRecord
from bot.config import ReflectionSettings
from bot.text import clip
from bot.untrusted import MAX_PERSON_CHARS, fence_off_loop

REFLECTION_OUTPUT_CHARS = 600


@dataclass(frozen=True, slots=True)
class Evaluation:
    action: str
    status: str
    evaluation: str = ""
    issues: tuple[str, ...] = ()
    plan_revision_needed: bool = False
    plan_revision: dict[str, Any] | None = None
    success_criteria_met: bool = False
    conservative: bool = False

    @property
    def failed(self) -> bool:
        return self.status != "success"

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "status": self.status,
            "evaluation": self.evaluation,
            "issues": list(self.issues),
            "plan_revision_needed": self.plan_revision_needed,
            "success_criteria_met": self.success_criteria_met,
            "conservative": self.conservative,
        }


@dataclass(frozen=True, slots=True)
class RevisionSuggestion:
    reason: str
    changes: tuple[Any, ...] = ()
    updated_action_plan: dict[str, Any] | None = None


class Revise(Protocol):
    async def __call__(
        self,
        suggestion: RevisionSuggestion,
        *,
        issues: Sequence[str] = (),
        feedback: str = "",
        counts: bool = True,
    ) -> None:
        """Revise the plan as ``suggestion`` says (``Reviser.revise``)."""
        ...


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
) -> str | None:
    """Why to reflect on ``record`` now (``error``, ``unexpected``, ``periodic``), or None."""
    if not settings.enabled:
        return None
    if not record.ok:
        return "error" if settings.trigger_on_error else None
    if differs:
        return "unexpected"
    interval = settings.trigger_interval
    if periodic and interval > 0 and since_last >= interval:
        return "periodic"
    return None


def _evaluation_from(data: Mapping[str, Any] | None, action: str) -> Evaluation:
    if data is None:
        return Evaluation(
            action=action,
            status="failure",
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
        status=str(reflection.get("status", "failure")),
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
        self, action: PlannedAction | None, record: ActionRecord, *, trigger: str
    ) -> Evaluation:
        output = clip(record.summary or record.output, REFLECTION_OUTPUT_CHARS, note=" [...]")
        answer = await self.caller.ask(
            "reflection",
            "reflection",
            depth=self.settings.depth,
            trigger=trigger,
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
        self, feedback: Sequence[Mapping[str, Any]], *, done: str, tools: str
    ) -> Evaluation:
        """What people said, analysed against the plan (may ask for a revision)."""
        blocks = []
        for item in feedback:
            who = f"feedback by {item.get('author', '?')}"
            body = str(item.get("body", ""))
            blocks.append(await fence_off_loop(body, who, limit=MAX_PERSON_CHARS))
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
                status="partial",
                evaluation="the feedback could not be analysed; revising the plan with it",
                issues=tuple(str(f.get("body", ""))[:200] for f in feedback),
                plan_revision_needed=True,
                conservative=True,
            )
        return _evaluation_from(answer.data, "human feedback")
