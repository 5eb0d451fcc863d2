"""What the record says when a run ends. Pure.

The model's completion summary and the record's verdict on it (``Assessment``).
What was tried, the current state and what a person should check (a request for a
person); the record's verdict in words (``disagreement``, ``criteria_lines``) and the
criteria the model cited; why a run cannot go on after a spent budget or a model error
(``trouble``) and how long an outage pauses it (``outage_wait``); the outcome and the
gate kept in the checkpoint, read back (``stored_outcome``, ``stored_quality``).
``bot.agent.finish`` builds the endings from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.llm.base import LLMBadRequest, LLMError
from bot.llm.budget import BudgetExceeded
from bot.record.evidence import Verdict, one_line
from bot.record.plan import PlanDocument
from bot.record.state import ActionStatus, AgentState
from bot.run_events import Outcome
from bot.storage.base import TaskState


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


def citations(model: dict[str, Any] | None) -> dict[str, str]:
    items = (model or {}).get("criteria") or []
    cited: dict[str, str] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("criterion") and item.get("evidence"):
            cited[str(item["criterion"])] = str(item["evidence"])
    return cited


def trouble(exc: BudgetExceeded | LLMError) -> tuple[str, list[str]]:
    """Why the run cannot go on after a spent budget or a model error, and what to check."""
    if isinstance(exc, BudgetExceeded):
        return exc.reason, [f"Raise {exc.setting} in the configuration if this task needs more"]
    if isinstance(exc, LLMBadRequest):
        hint = (
            "Check the llm settings (model name, context size) with `bot doctor`; if the "
            "server refuses structured output, pin llm.structured_output"
        )
        return f"the model endpoint refused the request: {exc}", [hint]
    return f"the model call failed: {exc}", []


def outage_wait(pauses: int, *, interval: float, cap: float) -> float:
    """Seconds before a task paused by an outage tries again, when its last ``pauses`` runs
    in a row ended the same way: ``interval``, doubling each time, at most ``cap``."""
    return float(min(interval * 2.0 ** min(pauses, 30), max(cap, interval)))


def stored_outcome(data: dict[str, object]) -> Outcome:
    summary = data.get("summary")
    return Outcome(
        TaskState(str(data["state"])),
        summary=dict(summary) if isinstance(summary, dict) else {},
        reason=str(data.get("reason", "")),
    )


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


def check_work(links: dict[str, Any]) -> str:
    where = links.get("change_request_url") or f"the branch `{links['branch']}`"
    return f"Review the unfinished work pushed to {where}"


def shown_delivery(links: dict[str, Any]) -> dict[str, Any]:
    """The delivery as the completion prompt and history show it (the gate in words)."""
    shown = {k: v for k, v in links.items() if k != "gate"}
    gate = links.get("gate")
    if isinstance(gate, dict):
        shown["quality_gate"] = gate.get("result")
    return shown
