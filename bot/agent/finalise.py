"""How a task ends: the completion summary, or a request for human intervention.

``assess`` asks the ``completion`` phase for the summary (docs/planning.md#completion) and
judges it against the record (``evidence.judge``): the model's word is one input, not the
verdict. ``complete`` ends a task the record shows achieved and emits COMPLETION, with
each success criterion and its evidence; ``disagreement`` words what the record shows
against the model's claim (the loop reflects and revises on it). ``intervene`` builds
the ``requires_human_intervention`` report (what was tried, the current state,
recommendations) and emits HUMAN_INTERVENTION, after copying the workspace's changes to
the run directory (the worker removes the workspace). Counts are facts from the state,
never the model's guesses; when the model cannot help (invalid answer, budget spent,
endpoint down) the report is built from the state alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.agent.artifacts import Artifacts
from bot.agent.budget import BudgetExceeded
from bot.agent.context import Outcome, ProgressKind
from bot.agent.context_builder import as_data
from bot.agent.evidence import Verdict, judge
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


@dataclass(frozen=True, slots=True)
class Assessment:
    """The model's completion summary and the record's verdict on it."""

    summary: dict[str, Any]
    claimed: bool  # the model says the goal is achieved (the record alone, without a model)
    verdict: Verdict
    answered: bool = True  # the model gave a completion summary

    def why_not(self) -> str:
        """What stands against the claim, for the reflection and the revision."""
        said = "the model reported the goal achieved, but " if self.answered else ""
        return said + disagreement(self.verdict)

    @property
    def achieved(self) -> bool:
        return self.claimed and self.verdict.agrees


def disagreement(verdict: Verdict) -> str:
    """Why the record does not show the goal achieved, in one sentence."""
    return "the record does not show the goal achieved: " + "; ".join(verdict.problems)


def criteria_lines(verdict: Verdict) -> list[str]:
    """Each success criterion with its evidence, for the report and the comment."""
    out = []
    for criterion in verdict.criteria:
        mark = "✔" if criterion.confirmed else "?"
        evidence = criterion.evidence or "no evidence in the record"
        out.append(f"{mark} {criterion.text} — {evidence}")
    return out


def _citations(model: dict[str, Any] | None) -> dict[str, str]:
    items = (model or {}).get("criteria") or []
    cited: dict[str, str] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("criterion") and item.get("evidence"):
            cited[str(item["criterion"])] = str(item["evidence"])
    return cited


class Finisher:
    def __init__(
        self,
        state: AgentState,
        recorder: Recorder,
        caller: PhaseCaller,
        artifacts: Artifacts,
        *,
        command_prefix: str,
        save_work: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self.state = state
        self.recorder = recorder
        self.caller = caller
        self.artifacts = artifacts
        self.command_prefix = command_prefix
        self.save_work = save_work  # pushes the work so far when the run stops unfinished

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
        verdict: Verdict | None = None,
        save: bool = True,
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
        if verdict is not None:
            summary["criteria"] = criteria_lines(verdict)
        tried = tried_lines(state)
        self.recorder.record("completion", status="requires_human_intervention", summary=summary)
        data: dict[str, Any] = {"summary": summary, "tried": tried, "reason": reason}
        if partial_plan:
            data["partial_plan"] = partial_plan
        data.update(details or {})
        outcome = Outcome(TaskState.NEEDS_HUMAN, summary=summary, reason=reason)
        if save and self.save_work is not None and state.outcome is None:
            links = await self.save_work()
            if links.get("branch"):
                summary["recommendations"].insert(0, _check_work(links))
        await self.artifacts.keep_changes()
        data["report"] = self.artifacts.write_report(
            f"needs a person: {reason}", [*summary.get("criteria", []), *tried]
        )
        await self._end(outcome, ProgressKind.HUMAN_INTERVENTION, data)
        return outcome

    async def assess(self, links: dict[str, Any]) -> Assessment:
        """The model's completion summary, judged against the record."""
        model = await self._ask("completed", delivery=_shown(links))
        plan = self.recorder.plan
        records = list(self.state.records.values())
        quality = stored_quality(self.state.delivery)
        delivered = {
            **links,
            "workspace_changed": self.state.delivery.get("workspace_changed", True),
        }
        verdict = judge(records, plan, delivered, quality, cited=_citations(model))
        summary: dict[str, Any] = {"key_outcomes": [], "lessons_learned": []}
        if model:
            summary.update(model)
        summary.update(self._facts())
        claimed = bool(model.get("goal_achieved")) if model else True
        summary["goal_achieved"] = claimed and verdict.agrees
        summary["criteria"] = criteria_lines(verdict)
        if verdict.problems:
            summary["disagreement"] = list(verdict.problems)
        if not model:
            changed = [r for r in records if r.changed]
            summary["key_outcomes"] = [one_line(r).removeprefix("- ") for r in changed][:8]
        self.recorder.record(
            "evidence", claimed=claimed, agrees=verdict.agrees, **verdict.to_dict()
        )
        return Assessment(summary, claimed, verdict, answered=model is not None)

    async def complete(self, links: dict[str, Any], assessment: Assessment) -> Outcome:
        """End a task the record shows achieved: the summary and the DONE outcome."""
        assert assessment.achieved, "only a task the record shows achieved is done"
        summary = assessment.summary
        self.recorder.record("completion", status="completed", summary=summary, **_shown(links))
        outcome = Outcome(TaskState.DONE, summary=summary, reason="")
        lines = [
            *map(str, summary.get("key_outcomes") or []),
            *summary["criteria"],
            *tried_lines(self.state),
        ]
        report = self.artifacts.write_report("goal achieved", lines)
        data = {"summary": summary, **links, "report": report}
        await self._end(outcome, ProgressKind.COMPLETION, data)
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


def stored_quality(delivery: dict[str, Any]) -> dict[str, Any] | None:
    """The gate's report kept with the delivery; a checkpoint of an earlier version kept
    only ``quality_passed``."""
    quality = delivery.get("quality")
    if isinstance(quality, dict):
        return quality
    if "quality_passed" in delivery:
        passed = bool(delivery["quality_passed"])
        return {"passed": passed, "feedback": "" if passed else "the quality gate failed"}
    return None


def _check_work(links: dict[str, Any]) -> str:
    where = links.get("change_request_url") or f"the branch `{links['branch']}`"
    return f"Review the unfinished work pushed to {where}"


def _shown(links: dict[str, Any]) -> dict[str, Any]:
    """The delivery as the completion prompt and history show it (the gate in words)."""
    shown = {k: v for k, v in links.items() if k != "gate"}
    gate = links.get("gate")
    if isinstance(gate, dict):
        shown["quality_gate"] = gate.get("result")
    return shown
