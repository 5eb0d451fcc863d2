"""How a task ends: the completion summary, or a request for human intervention.

``assess`` asks the ``completion`` phase for the summary (docs/planning.md#completion) and
judges it against the record (``evidence.judge``): the model's word is one input, not the
verdict. ``complete`` gives the ending of a task the record shows achieved (COMPLETION,
with each success criterion and its evidence); ``disagreement`` words what the record
shows against the model's claim (the loop reflects and revises on it). ``intervention``
builds the ``requires_human_intervention`` report (what was tried, the current state,
recommendations) and ``close`` gives its ending (HUMAN_INTERVENTION, with the work the
loop saved to the branch), after copying the workspace's changes to the run directory
(the worker removes the workspace). Counts are facts from the state, never the model's
guesses; when the model cannot help (invalid answer, budget spent, endpoint down) the
report is built from the state alone. The loop keeps the ending (``Ending``) and
announces it (``announce``): only the loop ends the run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.agent.briefing import as_data, thread_labels
from bot.agent.session import Session
from bot.config import LLMSettings
from bot.config.views import masked_url
from bot.llm.base import LLM, LLMError, LLMUnavailable
from bot.llm.budget import BudgetExceeded
from bot.llm.health import unreachable_steps
from bot.llm.tokens import count_tokens
from bot.record.ending import (
    Assessment,
    check_work,
    citations,
    criteria_lines,
    current_state,
    local_recommendations,
    outage_wait,
    shown_delivery,
    stored_quality,
    tried_lines,
)
from bot.record.ending import disagreement as disagreement  # the loop's ``ends.`` names
from bot.record.ending import stored_outcome as stored_outcome
from bot.record.ending import trouble as trouble
from bot.record.evidence import Verdict, compact_results, judge, one_line
from bot.record.history import CompletionStatus, HistoryKind
from bot.record.runlog import Artifacts
from bot.record.state import AgentState
from bot.run_events import (
    Completed,
    InterventionNeeded,
    Outcome,
    Paused,
    PauseReason,
    ProgressEvent,
    progress_event,
)
from bot.storage.base import TaskState

RESULTS_TOKENS = 700
OUTAGE_PROBE_SECONDS = 10.0

log = logging.getLogger("bot.agent.finish")


@dataclass(frozen=True, slots=True)
class Ending:
    """How the run ends: the outcome, and the event that announces it."""

    outcome: Outcome
    event: ProgressEvent


@dataclass
class Intervention:
    """A request for a person, before the work so far is saved and it is announced."""

    reason: str
    summary: dict[str, Any]
    data: dict[str, Any] = field(default_factory=dict)  # the closing event's other fields


class Finish:
    def __init__(self, session: Session, artifacts: Artifacts) -> None:
        self.session = session
        self.state = session.state
        self.caller = session.caller
        self.artifacts = artifacts
        self.command_prefix = session.ctx.settings.commands.prefix

    def _facts(self) -> dict[str, Any]:
        done, failed = self.state.counts()
        return {
            "tasks_completed": done,
            "tasks_failed": failed,
            "revision_attempts": self.state.revisions,
        }

    async def _ask(
        self,
        status: CompletionStatus,
        *,
        reason: str = "",
        delivery: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """The model's summary; None when it gives none. An unreachable model pauses a
        completion (it is worth waiting for) but not a request for help."""
        plan = self.session.plan
        records = list(self.state.records.values())
        try:
            answer = await self.caller.ask(
                "completion",
                "completion",
                status=status.value,
                goal=plan.goal if plan else None,
                results=as_data(
                    compact_results(records, budget_tokens=RESULTS_TOKENS, count=count_tokens)
                ),
                revisions=self.state.revisions,
                reason=reason,
                delivery=delivery or {},
                threads=thread_labels(self.session.ctx.task.request.round),
                **self._facts(),
            )
        except LLMUnavailable:
            if status is CompletionStatus.COMPLETED:
                raise
            return None
        except (LLMError, BudgetExceeded):
            return None
        summary = answer.data.get("summary") if answer.data else None
        return dict(summary) if isinstance(summary, dict) else None

    async def intervention(
        self,
        reason: str,
        *,
        ask_model: bool = True,
        partial_plan: dict[str, Any] | None = None,
        hints: Sequence[str] = (),
        details: dict[str, Any] | None = None,
        verdict: Verdict | None = None,
    ) -> Intervention:
        """The request for a person to step in (docs/planning.md#revision-limits);
        ``details`` go into the closing event as they are (``setup``: the failing set-up
        command)."""
        state = self.state
        summary: dict[str, Any] = {
            "goal_achieved": False,
            **self._facts(),
            "reason": reason,
            "current_state": current_state(state, self.session.plan),
            "recommendations": local_recommendations(state, self.command_prefix, hints),
        }
        status = CompletionStatus.NEEDS_PERSON
        model = await self._ask(status, reason=reason) if ask_model else None
        if model:
            if model.get("current_state"):
                summary["current_state"] = model["current_state"]
            advice = model.get("recommendations")
            if advice:  # what the bot knows for sure comes first, then the model's advice
                advice = advice if isinstance(advice, list) else [advice]
                summary["recommendations"] = [*hints, *advice]
        if verdict is not None:
            summary["criteria"] = criteria_lines(verdict)
        self.session.record(HistoryKind.COMPLETION, status=status, summary=summary)
        data: dict[str, Any] = {"partial_plan": partial_plan} if partial_plan else {}
        return Intervention(reason, summary, {**data, **(details or {})})

    async def close(self, asked: Intervention, saved: dict[str, Any]) -> Ending:
        """The ending of a request for a person; ``saved``: the links of the work so far
        the loop pushed to the branch ({} when nothing is there)."""
        summary, reason = asked.summary, asked.reason
        tried = tried_lines(self.state)
        if saved.get("branch"):
            summary["recommendations"].insert(0, check_work(saved))
        await self.artifacts.keep_changes()
        report = self.artifacts.write_report(
            f"needs a person: {reason}", [*summary.get("criteria", []), *tried]
        )
        data = {"summary": summary, "tried": tried, "reason": reason, **asked.data}
        event = progress_event(InterventionNeeded.kind, {**data, "report": report})
        return Ending(Outcome(TaskState.NEEDS_HUMAN, summary=summary, reason=reason), event)

    async def assess(self, links: dict[str, Any]) -> Assessment:
        """The model's completion summary, judged against the record."""
        model = await self._ask(CompletionStatus.COMPLETED, delivery=shown_delivery(links))
        plan = self.session.plan
        records = list(self.state.records.values())
        quality = stored_quality(self.state.delivery)
        delivered = {
            **links,
            "workspace_changed": self.state.delivery.get("workspace_changed", True),
        }
        verdict = judge(records, plan, delivered, quality, cited=citations(model),
                        open_loop=self.state.open_loop)  # fmt: skip
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
        self.session.record(
            HistoryKind.EVIDENCE, claimed=claimed, agrees=verdict.agrees, **verdict.to_dict()
        )
        return Assessment(summary, claimed, verdict, answered=model is not None)

    async def complete(self, links: dict[str, Any], assessment: Assessment) -> Ending:
        """The ending of a task the record shows achieved: the summary, DONE."""
        assert assessment.achieved, "only a task the record shows achieved is done"
        summary = assessment.summary
        status = CompletionStatus.COMPLETED
        self.session.record(
            HistoryKind.COMPLETION, status=status, summary=summary, **shown_delivery(links)
        )
        lines = [
            *map(str, summary.get("key_outcomes") or []),
            *summary["criteria"],
            *tried_lines(self.state),
        ]
        report = self.artifacts.write_report("goal achieved", lines)
        event = progress_event(Completed.kind, {"summary": summary, **links, "report": report})
        return Ending(Outcome(TaskState.DONE, summary=summary, reason=""), event)

    async def outage(self, error: str, *, now: float) -> Outcome:
        """Pause until the model answers again; people are told once per outage."""
        session = self.session
        reason = PauseReason.LLM_UNAVAILABLE
        settings = session.ctx.settings.llm
        if session.state.paused is not reason:
            session.state.paused = reason
            session.record(HistoryKind.PAUSED, reason=reason.value, error=error)
            endpoint = f"{settings.provider} {masked_url(settings.base_url)}"
            steps = list(await outage_steps(session.ctx.llm, settings))
            paused = Paused(reason=reason.value, endpoint=endpoint, error=error, setup_steps=steps)
            await session.milestone(paused)
        wait = outage_wait(
            session.state.outage_pauses,
            interval=settings.health_interval,
            cap=settings.max_pause_interval,
        )
        session.state.outage_pauses += 1
        await session.checkpoint()
        wake = now + wait
        return Outcome(TaskState.PAUSED, reason=reason.value, wake_at=wake, pause=reason)


async def outage_steps(llm: LLM, settings: LLMSettings) -> tuple[str, ...]:
    """What a person should do so the model answers again: the set-up steps of its health
    report (as ``/health/ai`` and ``bot doctor`` give them), asked within
    ``OUTAGE_PROBE_SECONDS``; the steps for an unreachable endpoint when the probe itself
    fails or takes longer."""
    try:
        async with asyncio.timeout(OUTAGE_PROBE_SECONDS):
            report = await llm.health()
        if report.setup_steps or report.ready:
            return report.setup_steps
    except Exception as exc:  # a probe of an endpoint that is down may fail in any way
        log.info("the model's health probe failed during an outage: %s", exc)
    return unreachable_steps(settings.provider, settings.base_url, settings.model)


def keep_ending(state: AgentState, ending: Ending) -> None:
    """Keep the outcome (and the event that announces it) before announcing it, so a
    re-run after a crash returns the same outcome and announces it exactly once."""
    outcome, event = ending.outcome, ending.event
    state.outcome = {
        "state": outcome.state.value,
        "summary": outcome.summary,
        "reason": outcome.reason,
        "event": {"kind": event.kind.value, "data": event.data},
        "announced": False,
    }


async def announce(session: Session) -> None:
    """Emit the stored closing event unless it went out already."""
    stored = session.state.outcome
    if stored is None or stored.get("announced"):
        return
    event = stored["event"]
    await session.milestone(progress_event(event["kind"], event["data"]))
    stored["announced"] = True
    await session.checkpoint()
