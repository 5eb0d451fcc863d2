"""Planning (docs/planning.md#planning): briefing, cache, one planning call, validation.

One ``planning`` call yields the planning document (goal, decomposition, plan), which
``PlanningEngine`` asks for, reads and validates; ``strategy``, ``decomposition_level``
and ``auto_adjust_level`` with ``complexity_threshold`` shape the prompt.

A rejected plan is re-planned once with the reasons; a second rejection, or a
``decomposition_failed`` answer (#error-handling), is tried once more at the coarsest
level with what failed and the partial plan (kept in the checkpoint). ``Planning.run``
returns a plan, an unclear goal (the loop posts the questions and waits), or no plan
(the loop asks a person). With ``planning.enabled: false`` the plan is the open tool
loop's, empty until the model's first call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot import tracing
from bot.agent.briefing import Briefing, build_context, tool_lines
from bot.agent.cache import PlanCache
from bot.agent.session import Session
from bot.config import ComplexityThreshold, PlanningSettings
from bot.events import TaskMode
from bot.llm.calls import PhaseCaller
from bot.llm.tokens import count_tokens
from bot.record.heard import waiting_for_answers
from bot.record.history import HistoryKind, previous_attempt
from bot.record.open_loop import PLAN_ONLY_REFUSED, open_plan
from bot.record.plan import (
    Complexity,
    PlanDocument,
    PlanFormatError,
    Subtask,
    ToolCheck,
    parse_goal,
    parse_plan,
    parse_subtasks,
)
from bot.record.plan_rules import plan_digest, validate_plan
from bot.record.planning_answer import PlanningAnswer, PlanningError, planning_answer
from bot.record.state import Phase, Waiting
from bot.record.texts import best_guess_text
from bot.run_events import ClarificationAsked, Outcome, PlanMade, WaitKind
from bot.tools.registry import ToolRegistry

PLANNING_ATTEMPTS = 2
COARSEST_LEVEL = "minimal"
LEVEL_FOR_COMPLEXITY = {
    Complexity.SIMPLE: "minimal",
    Complexity.MODERATE: "moderate",
    Complexity.COMPLEX: "detailed",
}


def classify_complexity(tokens: int, threshold: ComplexityThreshold) -> Complexity:
    """Simple up to ``simple`` tokens, moderate up to ``moderate``, else complex
    (docs/planning.md#plan-detail)."""
    if tokens <= threshold.simple:
        return Complexity.SIMPLE
    if tokens <= threshold.moderate:
        return Complexity.MODERATE
    return Complexity.COMPLEX


def planning_level(planning: PlanningSettings, task_text: str) -> tuple[Complexity, str]:
    """(complexity, decomposition level) for a task."""
    complexity = classify_complexity(count_tokens(task_text), planning.complexity_threshold)
    if planning.auto_adjust_level:
        return complexity, LEVEL_FOR_COMPLEXITY[complexity]
    return complexity, planning.decomposition_level


class PlanningFailed(Exception):
    """No acceptable plan: ``kind`` is an unclear goal or a failed decomposition."""

    def __init__(
        self,
        kind: PlanningError,
        message: str,
        *,
        questions: Sequence[str] = (),
        partial_plan: dict[str, Any] | None = None,
        best_guess: PlanDocument | None = None,
    ) -> None:
        super().__init__(f"{kind.value}: {message}")
        self.kind = kind
        self.message = message
        self.questions = tuple(questions)
        self.partial_plan = partial_plan
        self.best_guess = best_guess  # an unclear goal's valid plan under assumptions


def validated(
    plan: PlanDocument, check_tool: ToolCheck, planning: PlanningSettings
) -> tuple[PlanDocument | None, list[str]]:
    problems = validate_plan(plan, check_tool=check_tool, max_subtasks=planning.max_subtasks)
    return (None, problems) if problems else (plan, [])


class PlanningEngine:
    def __init__(
        self, caller: PhaseCaller, planning: PlanningSettings, *, check_tool: ToolCheck, tools: str
    ) -> None:
        self.caller = caller
        self.planning = planning
        self.check_tool = check_tool
        self.tools = tools

    async def understand_goal(
        self,
        context: Briefing,
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
        return planning_answer(answer.data, answer.error)

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
        return validated(plan, self.check_tool, self.planning)


def planning_engine(
    caller: PhaseCaller, planning: PlanningSettings, tools: ToolRegistry
) -> PlanningEngine:
    lines = tool_lines(tools.usable())
    return PlanningEngine(caller, planning, check_tool=tools.check, tools=lines)


def coarser_reason(failed: PlanningFailed) -> str:
    """What the coarser attempt is told of the finer one: why it failed, and its partial
    plan (feasible, infeasible, alternatives) when there is one."""
    parts = [failed.message or "the task could not be decomposed"]
    partial = failed.partial_plan or {}
    for key, label in (
        ("feasible_subtasks", "feasible"),
        ("infeasible_subtasks", "not feasible"),
        ("alternative_approaches", "alternatives"),
    ):
        items = [
            str(i.get("description") or i.get("id")) if isinstance(i, dict) else str(i)
            for i in partial.get(key) or []
        ]
        if items:
            parts.append(f"{label}: " + "; ".join(items))
    return ". ".join(parts)


@dataclass(frozen=True, slots=True)
class Planned:
    plan: PlanDocument


@dataclass(frozen=True, slots=True)
class NoPlan:
    reason: str
    partial_plan: dict[str, Any] | None = None


PlanningResult = Planned | PlanningFailed | NoPlan  # PlanningFailed: an unclear goal


class Planning:
    def __init__(self, session: Session, cache: PlanCache, *, clock: Callable[[], float]) -> None:
        self.session = session
        self.ctx = session.ctx  # the task, its issue, forge, tools and settings
        self.state = session.state
        self.cache = cache
        self.clock = clock
        self.settings = self.ctx.settings.planning

    def engine(self) -> PlanningEngine:
        return planning_engine(self.session.caller, self.settings, self.ctx.tools)

    def _tool_names(self) -> list[str]:
        return [t.name for t in self.ctx.tools.usable()]

    async def context(self) -> Briefing:
        """What the planner is told; a retry also gets the previous attempt's history."""
        ctx = self.ctx
        previous_id = ctx.task.request.previous_task_id
        previous = previous_attempt(ctx.data_dir, previous_id) if previous_id else ""
        return await build_context(
            ctx.forge,
            ctx.issue,
            ctx.settings,
            ctx.tools.usable(),
            instructions=ctx.task.request.instructions,
            previous=previous,
            repo_instructions=ctx.built.instructions if ctx.built is not None else "",
            follow_up=ctx.task.request.round,
            conflicts=ctx.conflicts,
            built=ctx.built,
        )

    async def _from_cache(self, context: Briefing, engine: PlanningEngine) -> PlanDocument | None:
        state = self.state
        if state.answers or state.replan_reason or context.previous_block or context.round:
            return None  # a retry (or a round) wants a new plan, not the one that was tried
        repo = self.ctx.issue.repo.key
        hit = await self.cache.lookup(context.task_text, repo, self._tool_names())
        if hit is None:
            return None
        plan, problems = engine.accept(hit.plan)
        if plan is None:
            self.session.record(HistoryKind.PLAN_REJECTED, cached=True, problems=problems)
            return None
        state.cached_plan = True
        return plan

    async def _ask(self, context: Briefing, engine: PlanningEngine) -> PlanDocument:
        state = self.state  # ``coarser``: why the finer decomposition failed, once it has
        while True:
            try:
                return await self._attempt(context, engine, state.coarser)
            except PlanningFailed as failed:
                if failed.kind is not PlanningError.DECOMPOSITION_FAILED or state.coarser:
                    raise
                # one attempt at the coarser level (kept in the checkpoint: a restarted
                # worker makes it, too): a rejection ends it
                state.coarser = coarser_reason(failed)
                state.planning_attempts = PLANNING_ATTEMPTS - 1
                self.session.record(
                    HistoryKind.PLAN_REJECTED, coarser=True, problems=[failed.message]
                )
                await self.session.checkpoint()

    async def _attempt(
        self, context: Briefing, engine: PlanningEngine, coarser: str
    ) -> PlanDocument:
        session, state = self.session, self.state
        while True:
            await session.show(Phase.GOAL_UNDERSTANDING)
            answer = await engine.understand_goal(
                context, replan_reason=state.replan_reason, answers=state.answers, coarser=coarser
            )
            if answer.error in (PlanningError.UNCLEAR_GOAL, PlanningError.DECOMPOSITION_FAILED):
                guess = None
                if answer.best_guess is not None:
                    guess, rejected = engine.accept(answer.best_guess)
                    if rejected:
                        session.record(
                            HistoryKind.PLAN_REJECTED, best_guess=True, problems=rejected
                        )
                raise PlanningFailed(
                    answer.error,
                    answer.message,
                    questions=answer.questions,
                    partial_plan=answer.partial(),
                    best_guess=guess,
                )
            problems: list[str] = []
            plan = None
            try:
                await session.show(Phase.TASK_DECOMPOSITION)
                engine.decompose_task(answer)
                await session.show(Phase.ACTION_PLANNING)
                plan, problems = engine.generate_action_plan(answer)
            except PlanFormatError as exc:
                problems = [str(exc)]
            if plan is not None:
                return plan
            state.planning_attempts += 1
            state.replan_reason = "; ".join(problems)
            session.record(
                HistoryKind.PLAN_REJECTED, problems=problems, attempt=state.planning_attempts
            )
            await session.checkpoint()
            if state.planning_attempts >= PLANNING_ATTEMPTS:
                raise PlanningFailed(
                    PlanningError.DECOMPOSITION_FAILED,
                    "the plan was rejected twice: " + state.replan_reason,
                    partial_plan=answer.partial(),
                )

    async def plan_for(self, context: Briefing, engine: PlanningEngine) -> PlanDocument:
        """A validated plan for ``context`` (from the cache when one fits)."""
        complexity, _level = planning_level(self.settings, context.task_text)
        self.state.complexity = complexity
        self.state.task_text = context.task_text
        cached = await self._from_cache(context, engine)
        if cached is not None:
            for phase in (
                Phase.GOAL_UNDERSTANDING,
                Phase.TASK_DECOMPOSITION,
                Phase.ACTION_PLANNING,
            ):
                await self.session.show(phase)
            return cached
        return await self._ask(context, engine)

    async def run(self) -> PlanningResult:
        """Plan the task: the plan (kept and announced), an unclear goal, or no plan.
        With planning off, the open tool loop's plan, which grows call by call."""
        session, state = self.session, self.state
        if not self.settings.enabled:  # docs/planning.md#without-planning
            if self.plan_only():
                return NoPlan(PLAN_ONLY_REFUSED)
            state.open_loop = True
            plan = open_plan(self.ctx.issue.title, self.ctx.issue.body)
        else:
            try:
                plan = await self.plan_for(await self.context(), self.engine())
            except PlanningFailed as failed:
                if failed.kind is PlanningError.UNCLEAR_GOAL:
                    return failed
                reason = f"the task could not be decomposed: {failed.message}"
                return NoPlan(reason, failed.partial_plan)
        session.set_plan(plan)
        state.replan_reason = state.coarser = ""
        document = plan.to_document()
        session.record(HistoryKind.PLAN, plan=document, cached=state.cached_plan)
        complexity = state.complexity.value if state.complexity is not None else ""
        statuses, cached = session.statuses(), state.cached_plan
        await session.emit(
            PlanMade(plan=document, statuses=statuses, cached=cached, complexity=complexity)
        )
        await session.checkpoint()
        return Planned(plan)

    def plan_only(self) -> bool:
        """``/agent plan``: the plan waits for approval before anything runs."""
        return self.ctx.task.request.mode is TaskMode.PLAN_ONLY

    async def clarify(self, failed: PlanningFailed) -> Outcome:
        """Post the questions and wait for answers (the loop has moved the task to WAIT);
        with a best-guess plan, show it too: ``/agent approve`` runs it as it is, answers
        make a new plan."""
        session, state = self.session, self.state
        questions = list(failed.questions) or [failed.message or "What exactly should be done?"]
        waiting = Waiting(WaitKind.ANSWERS, since=self.clock(), questions=questions)
        guess = failed.best_guess
        shown = ""
        if guess is not None:
            session.set_plan(guess)
            document = guess.to_document()
            waiting.plan_hash = plan_digest(document)
            shown = best_guess_text(guess, waiting.plan_hash)
            session.record(HistoryKind.PLAN, plan=document, cached=False, best_guess=True)
            await session.emit(
                PlanMade(plan=document, statuses=session.statuses(), best_guess=True)
            )
            newer = await self.ctx.store.messages_after(self.ctx.task.id, state.message_seq)
            waiting.after_seq = max([state.message_seq, *(m.seq for m in newer)])
        state.waiting = waiting
        session.record(HistoryKind.CLARIFICATION, reason=failed.message, questions=questions)
        await session.milestone(
            ClarificationAsked(questions=questions, message=failed.message, best_guess=shown)
        )
        await session.checkpoint()
        tracing.waiting(waiting.kind.value, f"answers to {len(questions)} questions")
        return waiting_for_answers()

    async def remember(self) -> None:
        """Cache the plan of a task that reached its goal without revisions (not a round's:
        it answers one CI failure, review or merge)."""
        state, repo = self.state, self.ctx.issue.repo.key
        if state.cached_plan or state.plan_number or state.plan is None or not state.task_text:
            return
        if self.ctx.task.request.round is None:
            await self.cache.put(state.task_text, repo, self._tool_names(), state.plan)
