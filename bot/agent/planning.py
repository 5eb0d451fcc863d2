"""PlanningEngine (docs/planning.md#planning): goal, decomposition, action plan, revision.

One ``planning`` call yields the whole planning document; ``understand_goal`` makes
it and ``decompose_task`` / ``generate_action_plan`` read their parts from it (the
latter also validates the plan). ``strategy``, ``decomposition_level`` and, with
``auto_adjust_level``, the task's size in tokens (``complexity_threshold``) shape
what the prompt asks for. ``revise_plan`` asks for a new action plan for the
remaining work and re-asks once when the answer or the plan is unusable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.agent.context_builder import PlanningContext
from bot.agent.llm_calls import PhaseCaller
from bot.agent.plan import (
    PlanDocument,
    PlanFormatError,
    Subtask,
    ToolCheck,
    parse_goal,
    parse_plan,
    parse_subtasks,
    revised_plan,
)
from bot.agent.plan_rules import validate_plan
from bot.config import ComplexityThreshold, PlanningSettings
from bot.llm.tokens import count_tokens

COARSEST_LEVEL = "minimal"
LEVEL_FOR_COMPLEXITY = {"simple": "minimal", "moderate": "moderate", "complex": "detailed"}


def classify_complexity(tokens: int, threshold: ComplexityThreshold) -> str:
    """Simple up to ``simple`` tokens, moderate up to ``moderate``, else complex
    (docs/planning.md#plan-detail)."""
    if tokens <= threshold.simple:
        return "simple"
    if tokens <= threshold.moderate:
        return "moderate"
    return "complex"


def planning_level(planning: PlanningSettings, task_text: str) -> tuple[str, str]:
    """(complexity, decomposition level) for a task."""
    complexity = classify_complexity(count_tokens(task_text), planning.complexity_threshold)
    if planning.auto_adjust_level:
        return complexity, LEVEL_FOR_COMPLEXITY[complexity]
    return complexity, planning.decomposition_level


@dataclass(frozen=True, slots=True)
class PlanningAnswer:
    """The planning document, or why there is none (``error_type``)."""

    document: dict[str, Any] | None
    error_type: str | None = None
    message: str = ""
    questions: tuple[str, ...] = ()
    partial_plan: dict[str, Any] | None = None
    comment: str = ""
    best_guess: dict[str, Any] | None = None  # an unclear goal's plan under assumptions


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


def _answer_from(data: dict[str, Any] | None, error: str | None) -> PlanningAnswer:
    if data is None:
        return PlanningAnswer(None, "invalid_answer", error or "no valid planning document")
    problem = data.get("error")
    if not isinstance(problem, Mapping):
        return PlanningAnswer(data, comment=str(data.get("comment", "")))
    partial = problem.get("partial_plan")
    kind = str(problem.get("type", "decomposition_failed"))
    guess = (
        data if kind == "unclear_goal" and isinstance(data.get("action_plan"), Mapping) else None
    )
    return PlanningAnswer(
        None,
        kind,
        str(problem.get("message", "")),
        tuple(str(q) for q in problem.get("clarification_needed") or ()),
        dict(partial) if isinstance(partial, Mapping) else None,
        str(data.get("comment", "")),
        best_guess={k: v for k, v in guess.items() if k != "error"} if guess else None,
    )


class PlanningEngine:
    def __init__(
        self,
        caller: PhaseCaller,
        planning: PlanningSettings,
        *,
        check_tool: ToolCheck,
        tools: str,
    ) -> None:
        self.caller = caller
        self.planning = planning
        self.check_tool = check_tool
        self.tools = tools

    async def understand_goal(
        self,
        context: PlanningContext,
        *,
        replan_reason: str = "",
        answers: Sequence[str] = (),
        coarser: str = "",
    ) -> PlanningAnswer:
        """Ask for the planning document (goal, decomposition and action plan at once).
        ``coarser``: why a finer decomposition failed; the plan is asked for again at the
        coarsest level (docs/planning.md#error-handling)."""
        _complexity, level = planning_level(self.planning, context.task_text)
        answer = await self.caller.ask(
            "planning",
            "planning",
            strategy=self.planning.strategy,
            level=COARSEST_LEVEL if coarser else level,
            max_subtasks=self.planning.max_subtasks,
            replan_reason=replan_reason,
            answers=list(answers),
            coarser=coarser,
            **context.prompt_vars(),
        )
        return _answer_from(answer.data, answer.error)

    def decompose_task(self, answer: PlanningAnswer) -> tuple[Subtask, ...]:
        """The subtasks of the planning document (``PlanFormatError`` when malformed)."""
        if answer.document is None:
            raise PlanFormatError(answer.message or "there is no planning document")
        parse_goal(answer.document)
        return parse_subtasks(answer.document)[1]

    def generate_action_plan(self, answer: PlanningAnswer) -> tuple[PlanDocument | None, list[str]]:
        """The validated plan, or None with the reasons it was rejected."""
        if answer.document is None:
            return None, [answer.message or "there is no planning document"]
        return self.accept(answer.document)

    def accept(
        self, document: Mapping[str, Any], *, revision: int = 0, done: Iterable[str] = ()
    ) -> tuple[PlanDocument | None, list[str]]:
        try:
            plan = parse_plan(document, revision=revision, done_tasks=done)
        except PlanFormatError as exc:
            return None, [str(exc)]
        problems = validate_plan(
            plan, check_tool=self.check_tool, max_subtasks=self.planning.max_subtasks
        )
        return (None, problems) if problems else (plan, [])

    def adopt(
        self,
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
            return RevisionResult(
                None, reason, changes, ("the revision has no updated_action_plan",)
            )
        try:
            plan = revised_plan(current, updated, revision=number, done_tasks=done)
        except PlanFormatError as exc:
            return RevisionResult(None, reason, changes, (str(exc),))
        problems = validate_plan(
            plan, check_tool=self.check_tool, max_subtasks=self.planning.max_subtasks
        )
        if problems:
            return RevisionResult(None, reason, changes, tuple(problems))
        return RevisionResult(plan, reason, changes)

    async def revise_plan(
        self,
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
            answer = await self.caller.ask(
                "revision",
                "reflection",
                goal=current.goal,
                number=number,
                limit=self.planning.revision.max_revisions,
                reason=request.reason,
                issues=list(request.issues),
                fallbacks=list(request.fallbacks),
                feedback=request.feedback,
                done=request.done,
                remaining=remaining,
                tools=self.tools,
                rejected=list(rejected),
            )
            if answer.data is None:
                rejected = [answer.error or "the answer was not a valid reflection document"]
                result = RevisionResult(None, request.reason, (), tuple(rejected))
                continue
            revision = answer.data.get("plan_revision") or {}
            result = self.adopt(current, revision, number=number, done=done_tasks)
            if result.plan is not None:
                return result
            rejected = result.problems
        return result
