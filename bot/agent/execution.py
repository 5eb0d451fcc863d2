"""Execution: setting the workspace up, then running planned actions, one at a time or a
parallel group at once.

Before a run's first batch, ``prepare`` asks the task's ``Preparer`` (bot/sandbox/setup.py)
once per run; what it did (the commands, their exit codes and times, or the cache it
restored) goes into ``AgentState.setup`` and the planning history (a server without a
sandbox skips set-up: no command could use it). A failing set-up is a ``SetupFailed``
(the loop asks a person, with the failing command and the tail of its output, without
asking the model: there is nothing for it to judge). A workspace an earlier run
prepared is not set up again.

An action whose planned ``arguments`` are complete (valid for the tool's schema) is
called directly; otherwise the ``execution`` phase gives the function call, seeing
the results so far (compacted). Each action is checkpointed when it starts and when
it ends, so a restarted worker never repeats a finished action, and never blindly
repeats a write that was in flight. An invalid model answer is a failed action,
never a crash. Each action ends in one of three kinds (``ActionOutcome``): its
record, a call the policy wants approved (``PendingApproval``), or a model / budget
error that ends the run (``CallFailed``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import jsonschema

from bot import tracing
from bot.agent.briefing import Briefing, as_data, build_context, repo_instructions_block
from bot.agent.session import Session
from bot.config import ExecutionSettings
from bot.llm.base import LLMError
from bot.llm.budget import BudgetExceeded, BudgetKind
from bot.llm.offers import Offered, native_offer
from bot.llm.tokens import count_tokens
from bot.record.evidence import unresolved_failures
from bot.record.folding import Recall
from bot.record.history import HistoryKind
from bot.record.judgement import unmet_precondition
from bot.record.open_loop import FINISH_TOOL, OPEN_TASK, max_steps, next_step, with_step
from bot.record.plan import PlanDocument, PlannedAction
from bot.record.plan_rules import next_batch
from bot.record.state import ActionRecord, ActionStatus, ToolCall
from bot.record.texts import SetupFailed, setup_failed
from bot.run_events import ActionProgress, CourseChanged, ErrorCategory, PlanMade
from bot.sandbox.setup import SetupStatus
from bot.tools.inspect import PathWatch, exists
from bot.tools.registry import ApprovalRequired, Tool

MAX_OUTPUT_CHARS = 20_000
MAX_LOGGED_CHARS = 2_000  # of a failed action's output, in errors.log
SUMMARY_OVER_CHARS = 6_000
SUMMARY_TOKENS = 300
READY_OUTPUT = "ready: nothing more to change in this step"
DATA_KEYS = ("web_url", "number", "sha", "paths", "path", "branch", "exit_code", "timed_out")


@dataclass(frozen=True, slots=True)
class PendingApproval:
    action: PlannedAction
    tool: str
    arguments: dict[str, Any]
    why: str = ""  # why the policy wants it approved, when it says

    @property
    def call(self) -> ToolCall:
        return ToolCall(self.action.key, self.action.task_id, self.tool, self.arguments)


@dataclass(frozen=True, slots=True)
class CallFailed:
    """The model or the budget failed while the action ran: the run ends with it."""

    error: LLMError | BudgetExceeded


ActionOutcome = ActionRecord | PendingApproval | CallFailed


def _tool_view(tool: Offered) -> dict[str, str]:
    """A tool as the execution prompts list it: name, purpose, arguments' schema."""
    return {"name": tool.name, "purpose": tool.purpose,
            "schema": json.dumps(tool.schema, separators=(",", ":"))}  # fmt: skip


def complete_arguments(tool: Tool, arguments: dict[str, Any] | None) -> bool:
    if arguments is None:
        return False
    return bool(jsonschema.Draft202012Validator(tool.schema).is_valid(arguments))


def _data_subset(data: dict[str, Any]) -> dict[str, Any]:
    return {k: data[k] for k in DATA_KEYS if k in data and isinstance(data[k], str | int | list)}


class ActionRunner:
    def __init__(self, session: Session, settings: ExecutionSettings) -> None:
        ctx = session.ctx
        self.session = session
        self.state = session.state
        self.caller = session.caller
        self.tools = ctx.tools
        self.settings = settings
        self.runlog = session.runlog
        self.results_budget = max(300, ctx.settings.llm.max_tokens_per_call // 2 - 600)
        built = ctx.built
        self.repo_instructions = repo_instructions_block(built.instructions if built else "")
        self._ready = False
        self._briefing: Briefing | None = None  # the open loop's (read on its first step)
        self.recall = Recall(session.state, session.caller, ctx.settings.planning.history,
                             budget_tokens=self.results_budget, fence=as_data,
                             checkpoint=session.checkpoint)  # fmt: skip

    async def prepare(self) -> SetupFailed | None:
        """Prepare the workspace once per run (set-up before work)."""
        built = self.session.ctx.built
        preparer = built.preparer if built is not None else None
        if self._ready or preparer is None:
            return None
        directory = self.runlog.directory
        logs = directory.path / "setup" if directory else None
        with tracing.span("setup") as span:
            result = await preparer.prepare(log_dir=logs)
            span.update({"bot.setup.status": result.status, "bot.setup.source": result.source})
        if result.status is SetupStatus.UNAVAILABLE:
            return None  # no clone yet: the next batch tries again
        self._ready = True
        if result.status is SetupStatus.READY:
            return None  # recorded by the run that prepared it
        self.state.setup = result.to_dict()
        self.session.record(HistoryKind.SETUP, **result.to_dict())
        await self.session.checkpoint()
        if result.status is not SetupStatus.FAILED:
            return None
        failed = setup_failed(result)
        step = result.failure
        assert step is not None
        how = "timed out" if step.timed_out else f"exit code {step.exit_code}"
        self.runlog.error(ErrorCategory.TOOL, f"set-up: {step.command}: {how}\n{step.tail}")
        return failed

    async def next_actions(self) -> list[PlannedAction]:
        """The next batch: the plan's next ready actions; in the open tool loop
        (``planning.enabled: false``), the model's next call ([] once it finished)."""
        plan, state = self.session.plan, self.state
        assert plan is not None
        batch = next_batch(plan, state.finished_keys(), max_parallel=self.settings.max_parallel)
        if batch or not state.open_loop:
            return batch
        return await self._open_step(plan)

    async def _open_step(self, plan: PlanDocument) -> list[PlannedAction]:
        """Ask the model for the open loop's next call among every usable tool (or
        ``finish``); the call becomes a step of the plan, shown in its checklist."""
        session, state, ctx = self.session, self.state, self.session.ctx
        limit = max_steps(ctx.settings.planning.max_subtasks)
        if len(plan.actions) >= limit:
            raise BudgetExceeded(BudgetKind.STEPS, f"the open tool loop made {limit} calls")
        if self._briefing is None:  # read once a run: the issue and the repository's facts
            self._briefing = await build_context(
                ctx.forge, ctx.issue, ctx.settings, ctx.tools.usable(),
                instructions=ctx.task.request.instructions,
                repo_instructions=ctx.built.instructions if ctx.built is not None else "",
                follow_up=ctx.task.request.round, conflicts=ctx.conflicts, built=ctx.built,
            )  # fmt: skip
        offered: list[Offered] = [*self.tools.usable(), FINISH_TOOL]
        briefing = {**self._briefing.prompt_vars(), "tools": [_tool_view(t) for t in offered]}
        await self.recall.fold(plan.goal)
        answer = await self.caller.ask_offering(
            "open_loop", "execution", native_offer(OPEN_TASK, offered), memo=self.recall.memo(),
            results=self.recall.results(), notes=list(state.open_notes),
            steps=len(plan.actions), max_steps=limit, **briefing,
        )  # fmt: skip
        state.open_notes = []
        step = next_step(answer.data, answer.error, len(plan.actions) + 1)
        if step.action is None:  # finished: deliver
            await session.checkpoint()
            return []
        session.set_plan(with_step(plan, step.action))
        await session.emit(PlanMade(plan=state.plan or {}, statuses=session.statuses()))
        if step.error:  # an unusable answer is a failed step
            key = step.action.key
            await self._finish(ActionRecord(key, key, ""), ok=False, output=step.error)
        await session.checkpoint()
        return [step.action]

    async def run_batch(self, batch: list[PlannedAction]) -> list[ActionOutcome]:
        """Run ``batch`` (concurrently, at most ``max_parallel`` at a time). Once an
        earlier action failed, an action whose preconditions no longer hold is not run."""
        limit = asyncio.Semaphore(self.settings.max_parallel)
        writers = sum(1 for a in batch if (t := self.tools.get(a.tool)) and t.writes)

        async def guarded(action: PlannedAction) -> ActionOutcome:
            async with limit:
                try:
                    blocked = self._unmet(action)
                    if blocked:
                        return await self._not_run(action, blocked)
                    return await self.run_one(action, watch=writers <= 1)
                except (LLMError, BudgetExceeded) as exc:
                    return CallFailed(exc)

        return list(await asyncio.gather(*(guarded(a) for a in batch)))

    def _unmet(self, action: PlannedAction) -> str:
        """Why ``action`` should not run (docs/planning.md#unexpected-results), checked
        only once an earlier action failed and nothing made up for it."""
        plan, records = self.session.plan, list(self.state.records.values())
        if plan is None or action.key in self.state.records:
            return ""
        if not unresolved_failures(records, plan):
            return ""
        built = self.session.ctx.built
        ws = built.workspace if built is not None else None
        return unmet_precondition(
            action, plan, records, lambda p: exists(ws, p) if ws is not None else None
        )

    async def _not_run(self, action: PlannedAction, why: str) -> ActionRecord:
        """An action not run because its preconditions no longer hold: a failed action
        (reflection and revision follow), and a change of course people are told of."""
        text = f"{action.key} was not run: {why}"
        self.state.course.append(text)
        await self.session.emit(CourseChanged(reason=text, key=action.key))
        arguments = dict(action.arguments or {})
        record = ActionRecord(action.key, action.task_id, action.tool, arguments=arguments,
                              revision=self._rev())  # fmt: skip
        return await self._finish(record, ok=False, output=f"not run: {why}")

    async def function_call(
        self, action: PlannedAction, *, feedback: str = "", choices: list[Tool] | None = None
    ) -> tuple[str, dict[str, Any]] | str:
        """(tool, arguments) for ``action``, or why there is none. ``choices``: the tools
        the model may pick from (default: the action's own tool)."""
        approved = self.state.approved_calls.get(action.key)
        if approved is not None:
            return str(approved["tool"]), dict(approved["arguments"])
        tool = self.tools.get(action.tool)
        if tool is None:
            return f"the tool {action.tool} is not available"
        if not feedback and complete_arguments(tool, action.arguments):
            return tool.name, dict(action.arguments or {})
        plan = self.session.plan
        offered = choices or [tool]
        await self.recall.fold(plan.goal if plan else None)
        answer = await self.caller.ask_offering(
            "execution",
            "execution",
            native_offer(action.task_id, offered),
            goal=plan.goal if plan else None,
            action=action,
            tools=[_tool_view(t) for t in offered],
            known_arguments=json.dumps(action.arguments) if action.arguments else "",
            results=self.recall.results(count_tokens(feedback)),
            feedback=feedback,
            repo_instructions=self.repo_instructions,
            memo=self.recall.memo(),
        )
        if answer.data is None:
            return f"the model gave no valid execution document: {answer.error}"
        call = answer.data["function_call"]
        name = str(call["name"])
        if name not in {t.name for t in offered}:
            allowed = ", ".join(t.name for t in offered)
            return f"the model called {name}, which this action does not use ({allowed})"
        return name, dict(call["arguments"])

    async def run_one(
        self,
        action: PlannedAction,
        *,
        feedback: str = "",
        choices: list[Tool] | None = None,
        ready_tool: str = "",
        watch: bool = True,
    ) -> ActionRecord | PendingApproval:
        """Run ``action``. ``ready_tool``: a tool among ``choices`` the model names to say
        it has nothing more to do here (a quality fix round): recorded, never called.
        ``watch``: compare the paths a file tool changed with those it meant to change
        (no other write runs meanwhile)."""
        state, session = self.state, self.session
        existing = state.records.get(action.key)
        if existing is not None and existing.finished:
            return existing
        if existing is not None and existing.writes:
            return await self._interrupted(existing)
        call: tuple[str, dict[str, Any]] | str
        if existing is not None:  # a read that was running when the worker stopped
            call = (existing.tool, existing.arguments)
        else:
            call = await self.function_call(action, feedback=feedback, choices=choices)
        if isinstance(call, str):
            record = ActionRecord(action.key, action.task_id, action.tool, revision=self._rev())
            return await self._finish(record, ok=False, output=call)
        name, arguments = call
        if ready_tool and name == ready_tool:
            record = ActionRecord(action.key, action.task_id, name, revision=self._rev())
            return await self._finish(record, ok=True, output=READY_OUTPUT)
        tool = self.tools.get(name)
        record = ActionRecord(
            action.key,
            action.task_id,
            name,
            arguments=arguments,
            writes=bool(tool and tool.writes),
            revision=self._rev(),
        )
        state.records[action.key] = record
        if record.writes:  # a write in flight is never repeated blindly after a restart
            await session.checkpoint()
        await session.emit(
            ActionProgress(task_id=action.task_id, key=action.key, tool=name,
                           purpose=action.purpose, status=ActionStatus.RUNNING.value)
        )  # fmt: skip
        approved = action.key in state.approved_calls
        built = session.ctx.built
        paths = None
        if watch and built is not None:  # what a file tool changes, against what it meant to
            paths = await PathWatch.start(built.workspace, tool, arguments)
        try:
            result = await self.tools.call(
                name, arguments, timeout=self.settings.action_timeout, approved=approved
            )
        except ApprovalRequired as asked:
            del state.records[action.key]
            await session.checkpoint()
            return PendingApproval(action, name, arguments, asked.why)
        state.approved_calls.pop(action.key, None)
        if approved and result.ok:  # an approved write approves what it wrote, exactly
            state.approved_paths.update(result.data.get("digests") or {})
        record.changed = result.changed
        record.duration = result.duration
        record.data = _data_subset(result.data)
        compared = await paths.compare() if paths is not None and result.ok else None
        if compared is not None:
            record.unchanged_paths, record.unexpected_paths = compared
        await self._finish(record, ok=result.ok, output=result.output)
        await self._summarise(record)
        return record

    def _rev(self) -> int:
        plan = self.session.plan
        return plan.revision if plan else 0

    async def _finish(self, record: ActionRecord, *, ok: bool, output: str) -> ActionRecord:
        session = self.session
        record.status = ActionStatus.DONE if ok else ActionStatus.FAILED
        record.output = output[:MAX_OUTPUT_CHARS]
        self.state.records[record.key] = record
        await session.checkpoint()
        if not ok:
            shown = self.runlog.redact(output)[:MAX_LOGGED_CHARS]  # redact, then cut
            self.runlog.error(ErrorCategory.TOOL, f"{record.key} ({record.tool}) failed: {shown}")
        session.record(
            HistoryKind.ACTION,
            key=record.key,
            task_id=record.task_id,
            tool=record.tool,
            arguments=record.arguments,
            ok=ok,
            changed=record.changed,
            result=output[:300],
            duration=round(record.duration, 3),
        )
        await session.emit(
            ActionProgress(task_id=record.task_id, key=record.key, tool=record.tool,
                           status=record.status.value, changed=record.changed,
                           result=output[:200])
        )  # fmt: skip
        return record

    async def _interrupted(self, record: ActionRecord) -> ActionRecord:
        """A write that was running when the worker stopped: its effect is unknown, so it
        is not repeated blindly; reflection decides what to do."""
        return await self._finish(
            record,
            ok=False,
            output="interrupted by a worker restart while running; whether it changed "
            "anything is unknown: check before writing again",
        )

    async def _summarise(self, record: ActionRecord) -> None:
        if len(record.output) <= SUMMARY_OVER_CHARS:
            return
        plan = self.session.plan
        try:
            record.summary = await self.caller.text(
                "summarise",
                limit=SUMMARY_TOKENS,
                goal=plan.goal if plan else None,
                tool=record.tool,
                output=as_data(record.output[: SUMMARY_OVER_CHARS * 2]),
            )
        except BudgetExceeded:
            return
        await self.session.checkpoint()
