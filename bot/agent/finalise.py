"""How a task ends: the completion summary, or a request for human intervention.

``complete`` asks the ``completion`` phase for the summary (docs/planning.md#completion)
and emits COMPLETION; ``intervene`` builds the ``requires_human_intervention``
report (what was tried, the current state, recommendations) and emits
HUMAN_INTERVENTION, after copying the workspace's changes to the run directory
(the worker removes the workspace). Counts are facts from the state, never the
model's guesses; when the model cannot help (invalid answer, budget spent,
endpoint down) the report is built from the state alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.agent.artifacts import Artifacts
from bot.agent.budget import BudgetExceeded
from bot.agent.context import Outcome, ProgressKind
from bot.agent.context_builder import as_data
from bot.agent.llm_calls import PhaseCaller
from bot.agent.plan import PlanDocument
from bot.agent.ports import Recorder
from bot.agent.results import compact_results, one_line
from bot.agent.state import ActionStatus, AgentState, Phase, Stage
from bot.llm.base import LLMError, LLMUnavailable
from bot.llm.tokens import count_tokens
from bot.storage.base import TaskState

RESULTS_TOKENS = 700


def tried_lines(state: AgentState) -> list[str]:
    lines = [one_line(r).removeprefix("- ") for r in state.records.values()]
    return lines[-12:] + state.tried[-6:]


def local_recommendations(state: AgentState, prefix: str, hints: Sequence[str] = ()) -> list[str]:
    failed = [r for r in state.records.values() if r.status is ActionStatus.FAILED]
    out = list(hints)
    for record in failed[-3:]:
        first = (record.output.strip().splitlines() or ["(no output)"])[0][:160]
        out.append(f"Check why {record.tool} failed: {first}")
    out.append(f"Clarify the issue or comment with guidance, then use `{prefix} retry`")
    return out


def current_state(state: AgentState, plan: PlanDocument | None) -> str:
    done, failed = state.counts()
    pending = 0
    if plan is not None:
        finished = state.finished_keys()
        pending = sum(1 for a in plan.actions if a.key not in finished)
    changed = "; the repository was changed" if state.changed_anything() else ""
    return f"{done} actions done, {failed} failed, {pending} not run{changed}"


class Finisher:
    def __init__(
        self,
        state: AgentState,
        recorder: Recorder,
        caller: PhaseCaller,
        artifacts: Artifacts,
        *,
        command_prefix: str,
    ) -> None:
        self.state = state
        self.recorder = recorder
        self.caller = caller
        self.artifacts = artifacts
        self.command_prefix = command_prefix

    def _facts(self) -> dict[str, Any]:
        done, failed = self.state.counts()
        return {
            "tasks_completed": done,
            "tasks_failed": failed,
            "revision_attempts": self.state.revisions,
        }

    async def _ask(
        self, status: str, *, reason: str = "", delivery: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """The model's summary; None when it gives none. An unreachable model pauses a
        completion (it is worth waiting for) but not a request for help."""
        plan = self.recorder.plan
        records = list(self.state.records.values())
        try:
            answer = await self.caller.ask(
                "completion",
                "completion",
                status=status,
                goal=plan.goal if plan else None,
                results=as_data(
                    compact_results(records, budget_tokens=RESULTS_TOKENS, count=count_tokens)
                ),
                revisions=self.state.revisions,
                reason=reason,
                delivery=delivery or {},
                **self._facts(),
            )
        except LLMUnavailable:
            if status == "completed":
                raise
            return None
        except (LLMError, BudgetExceeded):
            return None
        summary = answer.data.get("summary") if answer.data else None
        return dict(summary) if isinstance(summary, dict) else None

    async def intervene(
        self,
        reason: str,
        *,
        ask_model: bool = True,
        partial_plan: dict[str, Any] | None = None,
        hints: Sequence[str] = (),
        details: dict[str, Any] | None = None,
    ) -> Outcome:
        """Stop and ask a person to step in (docs/planning.md#revision-limits); ``details``
        go into the closing event as they are (``setup``: the failing set-up command)."""
        state = self.state
        summary: dict[str, Any] = {
            "goal_achieved": False,
            **self._facts(),
            "reason": reason,
            "current_state": current_state(state, self.recorder.plan),
            "recommendations": local_recommendations(state, self.command_prefix, hints),
        }
        model = await self._ask("requires_human_intervention", reason=reason) if ask_model else None
        if model:
            if model.get("current_state"):
                summary["current_state"] = model["current_state"]
            advice = model.get("recommendations")
            if advice:  # what the bot knows for sure comes first, then the model's advice
                advice = advice if isinstance(advice, list) else [advice]
                summary["recommendations"] = [*hints, *advice]
        tried = tried_lines(state)
        self.recorder.record("completion", status="requires_human_intervention", summary=summary)
        data: dict[str, Any] = {"summary": summary, "tried": tried, "reason": reason}
        if partial_plan:
            data["partial_plan"] = partial_plan
        data.update(details or {})
        outcome = Outcome(TaskState.NEEDS_HUMAN, summary=summary, reason=reason)
        await self.artifacts.keep_changes()
        self.artifacts.write_report(f"needs a person: {reason}", tried)
        await self._end(outcome, ProgressKind.HUMAN_INTERVENTION, data)
        return outcome

    async def complete(self, extra: dict[str, Any]) -> Outcome:
        """The completion summary and the final outcome (done, or not achieved)."""
        done, failed = self.state.counts()
        model = await self._ask("completed", delivery=extra)
        summary: dict[str, Any] = {
            "goal_achieved": failed == 0 and done > 0,
            "key_outcomes": [],
            "lessons_learned": [],
        }
        if model:
            summary.update(model)
        summary.update(self._facts())
        if extra.get("quality_passed") is False:
            summary["goal_achieved"] = False  # a failing quality gate is not a finished task
        if not model:
            changed = [r for r in self.state.records.values() if r.changed]
            summary["key_outcomes"] = [one_line(r).removeprefix("- ") for r in changed][:8]
        self.recorder.record("completion", status="completed", summary=summary, **extra)
        achieved = bool(summary.get("goal_achieved"))
        state = TaskState.DONE if achieved else TaskState.NEEDS_HUMAN
        reason = "" if achieved else "the goal was not achieved"
        outcome = Outcome(state, summary=summary, reason=reason)
        verdict = "goal achieved" if achieved else "goal not achieved"
        lines = [*map(str, summary.get("key_outcomes") or []), *tried_lines(self.state)]
        self.artifacts.write_report(verdict, lines)
        await self._end(outcome, ProgressKind.COMPLETION, {"summary": summary, **extra})
        return outcome

    async def _end(self, outcome: Outcome, kind: ProgressKind, data: dict[str, Any]) -> None:
        """Keep the outcome (and the event that announces it) before announcing it, so a
        re-run after a crash returns the same outcome and announces it exactly once."""
        recorder = self.recorder
        self.state.outcome = {
            "state": outcome.state.value,
            "summary": outcome.summary,
            "reason": outcome.reason,
            "event": {"kind": kind.value, "data": data},
            "announced": False,
        }
        recorder.to(Stage.DONE)
        await recorder.show(Phase.COMPLETION)
        await recorder.checkpoint()
        await announce(self.state, recorder)


async def announce(state: AgentState, recorder: Recorder) -> None:
    """Emit the stored closing event unless it went out already."""
    stored = state.outcome
    if stored is None or stored.get("announced"):
        return
    event = stored["event"]
    await recorder.milestone(ProgressKind(event["kind"]), **event["data"])
    stored["announced"] = True
    await recorder.checkpoint()
