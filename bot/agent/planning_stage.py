"""The planning stage of a run: context, cache, one planning call, validation, re-plan once.

A rejected plan is re-planned once with the reasons in the prompt; a second
rejection, or a ``decomposition_failed`` answer (docs/planning.md#error-handling), is tried
once more at the coarsest level, with what failed and the partial plan in the prompt;
when that fails too, the run ends in human intervention with the partial plan. An
``unclear_goal`` answer (#waiting) posts the questions and waits for the author's answer
(``Exit``); the others end the run with ``NeedsPerson``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bot.agent.answers import waiting_for_answers
from bot.agent.approval_text import plain
from bot.agent.cache import PlanCache
from bot.agent.context import ProgressKind, TaskContext
from bot.agent.context_builder import PlanningContext, build_context, tool_lines
from bot.agent.exits import Exit, NeedsPerson
from bot.agent.history import previous_attempt
from bot.agent.llm_calls import PhaseCaller
from bot.agent.plan import PlanDocument, PlanFormatError
from bot.agent.plan_approval import plan_digest, plan_id
from bot.agent.planning import PlanningAnswer, PlanningEngine, planning_level
from bot.agent.ports import Recorder
from bot.agent.state import AgentState, Phase, Stage, Waiting, WaitKind
from bot.events import TaskMode

PLANNING_ATTEMPTS = 2


class PlanningFailed(Exception):
    """No acceptable plan: ``kind`` is ``unclear_goal`` or ``decomposition_failed``."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        questions: Sequence[str] = (),
        partial_plan: dict[str, Any] | None = None,
        best_guess: PlanDocument | None = None,
    ) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.questions = tuple(questions)
        self.partial_plan = partial_plan
        self.best_guess = best_guess  # an unclear goal's valid plan under assumptions


def _partial(answer: PlanningAnswer) -> dict[str, Any] | None:
    if answer.partial_plan is not None:
        return answer.partial_plan
    if answer.document is None:
        return None
    decomposition = answer.document.get("task_decomposition") or {}
    return {"feasible_subtasks": decomposition.get("subtasks") or [], "infeasible_subtasks": []}


def best_guess_text(plan: PlanDocument, digest: str) -> str:
    """The best-guess plan as the clarification shows it: goal, assumptions, actions."""
    goal = plan.goal
    lines = [f"Goal: {plain(goal.main_objective)}"]
    if goal.context:
        lines.append(f"Assumptions: {plain(goal.context)}")
    lines += [f"- {plain(a.key)}: {plain(a.tool)} - {plain(a.purpose)}" for a in plan.actions]
    lines += ["", f"Plan `{plan_id(digest)}`: an approval counts for this plan only."]
    return "\n".join(lines)


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


class PlanningStage:
    def __init__(
        self,
        ctx: TaskContext,
        state: AgentState,
        recorder: Recorder,
        caller: PhaseCaller,
        cache: PlanCache,
        *,
        clock: Callable[[], float],
    ) -> None:
        self.ctx = ctx  # the task, its issue, forge, tools and settings: what planning reads
        self.state = state
        self.recorder = recorder
        self.caller = caller
        self.cache = cache
        self.clock = clock
        self.settings = ctx.settings.planning

    def engine(self) -> PlanningEngine:
        tools = self.ctx.tools
        return PlanningEngine(
            self.caller,
            self.settings,
            check_tool=tools.check,
            tools=tool_lines(tools.usable()),
        )

    def _tool_names(self) -> list[str]:
        return [t.name for t in self.ctx.tools.usable()]

    async def context(self) -> PlanningContext:
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
        )

    async def _from_cache(
        self, context: PlanningContext, engine: PlanningEngine
    ) -> PlanDocument | None:
        state = self.state
        if state.answers or state.replan_reason or context.previous_block:
            return None  # a retry wants a new plan, not the one that was tried
        repo = self.ctx.issue.repo.key
        hit = await self.cache.lookup(context.task_text, repo, self._tool_names())
        if hit is None:
            return None
        plan, problems = engine.accept(hit.plan)
        if plan is None:
            self.recorder.record("plan_rejected", cached=True, problems=problems)
            return None
        state.cached_plan = True
        return plan

    async def _ask(self, context: PlanningContext, engine: PlanningEngine) -> PlanDocument:
        coarser = ""  # why the finer decomposition failed, once it has
        while True:
            try:
                return await self._attempt(context, engine, coarser)
            except PlanningFailed as failed:
                if failed.kind != "decomposition_failed" or coarser:
                    raise
                coarser = coarser_reason(failed)
                # one attempt at the coarser level: a rejection ends it
                self.state.planning_attempts = PLANNING_ATTEMPTS - 1
                self.recorder.record("plan_rejected", coarser=True, problems=[failed.message])
                await self.recorder.checkpoint()

    async def _attempt(
        self, context: PlanningContext, engine: PlanningEngine, coarser: str
    ) -> PlanDocument:
        recorder, state = self.recorder, self.state
        while True:
            await recorder.show(Phase.GOAL_UNDERSTANDING)
            answer = await engine.understand_goal(
                context, replan_reason=state.replan_reason, answers=state.answers, coarser=coarser
            )
            if answer.error_type in ("unclear_goal", "decomposition_failed"):
                guess = None
                if answer.best_guess is not None:
                    guess, rejected = engine.accept(answer.best_guess)
                    if rejected:
                        recorder.record("plan_rejected", best_guess=True, problems=rejected)
                raise PlanningFailed(
                    answer.error_type,
                    answer.message,
                    questions=answer.questions,
                    partial_plan=_partial(answer),
                    best_guess=guess,
                )
            problems: list[str] = []
            plan = None
            try:
                await recorder.show(Phase.TASK_DECOMPOSITION)
                engine.decompose_task(answer)
                await recorder.show(Phase.ACTION_PLANNING)
                plan, problems = engine.generate_action_plan(answer)
            except PlanFormatError as exc:
                problems = [str(exc)]
            if plan is not None:
                return plan
            state.planning_attempts += 1
            state.replan_reason = "; ".join(problems)
            recorder.record("plan_rejected", problems=problems, attempt=state.planning_attempts)
            await recorder.checkpoint()
            if state.planning_attempts >= PLANNING_ATTEMPTS:
                raise PlanningFailed(
                    "decomposition_failed",
                    "the plan was rejected twice: " + state.replan_reason,
                    partial_plan=_partial(answer),
                )

    async def plan_for(self, context: PlanningContext, engine: PlanningEngine) -> PlanDocument:
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
                await self.recorder.show(phase)
            return cached
        return await self._ask(context, engine)

    async def run(self) -> None:
        """Plan the task; raises ``Exit`` (waiting for answers) or ``NeedsPerson`` when no
        plan comes out of it."""
        recorder, state = self.recorder, self.state
        context = await self.context()
        try:
            plan = await self.plan_for(context, self.engine())
        except PlanningFailed as failed:
            if failed.kind == "unclear_goal":
                await self._clarify(failed)
            reason = f"the task could not be decomposed: {failed.message}"
            raise NeedsPerson(reason, partial_plan=failed.partial_plan) from None
        recorder.set_plan(plan)
        state.replan_reason = ""
        recorder.record("plan", plan=plan.to_document(), cached=state.cached_plan)
        await recorder.emit(
            ProgressKind.PLAN,
            plan=plan.to_document(),
            statuses=recorder.statuses(),
            cached=state.cached_plan,
            complexity=state.complexity,
        )
        await recorder.checkpoint()

    def plan_only(self) -> bool:
        """``/agent plan``: the plan waits for approval before anything runs."""
        return self.ctx.task.request.mode is TaskMode.PLAN_ONLY

    async def _clarify(self, failed: PlanningFailed) -> None:
        """Post the questions and wait for answers; with a best-guess plan, show it too:
        ``/agent approve`` runs it as it is, answers make a new plan (``Waits``)."""
        recorder, state = self.recorder, self.state
        questions = list(failed.questions) or [failed.message or "What exactly should be done?"]
        waiting = Waiting(WaitKind.ANSWERS, since=self.clock(), questions=questions)
        guess = failed.best_guess
        shown = ""
        if guess is not None:
            recorder.set_plan(guess)
            document = guess.to_document()
            waiting.plan_hash = plan_digest(document)
            shown = best_guess_text(guess, waiting.plan_hash)
            recorder.record("plan", plan=document, cached=False, best_guess=True)
            await recorder.emit(
                ProgressKind.PLAN, plan=document, statuses=recorder.statuses(), best_guess=True
            )
            newer = await self.ctx.store.messages_after(self.ctx.task.id, state.message_seq)
            waiting.after_seq = max([state.message_seq, *(m.seq for m in newer)])
        state.waiting = waiting
        recorder.to(Stage.WAIT)
        recorder.record("clarification", reason=failed.message, questions=questions)
        await recorder.milestone(
            ProgressKind.CLARIFICATION,
            questions=questions,
            message=failed.message,
            waiting="clarification",
            best_guess=shown,
        )
        await recorder.checkpoint()
        raise Exit(waiting_for_answers())

    async def remember(self) -> None:
        """Cache the plan of a task that reached its goal without revisions."""
        state = self.state
        if state.cached_plan or state.plan_number or state.plan is None or not state.task_text:
            return
        repo = self.ctx.issue.repo.key
        await self.cache.put(state.task_text, repo, self._tool_names(), state.plan)
