"""What the change request says: its body, with the quality gate step by step. Pure.

``change_request_body`` links the issue, shows the goal and the plan checklist and the
gate (``gate_lines``: the result, then each step with its command, result and counts);
an unfinished delivery (``Delivery.save_work``) says so first. ``gate_view`` is the
gate as the LINKS event carries it to the status comment.
"""

from __future__ import annotations

from typing import Any

from bot.agent.plan import PlanDocument
from bot.events import IssueRef
from bot.tools.quality import GateResult, gate_steps, stored_result

UNFINISHED_NOTE = (
    "> **Unfinished.** The coding agent stopped before the work was done (see the issue for "
    "why); this is the work so far, not checked by the quality gate."
)


def change_request_body(
    issue: IssueRef,
    plan: PlanDocument | None,
    statuses: dict[str, str],
    quality: dict[str, Any] | None,
    *,
    unfinished: bool = False,
) -> str:
    lines = [f"Closes #{issue.number}" if not issue.is_change_request else f"For #{issue.number}"]
    if issue.web_url:
        lines[0] += f" ({issue.web_url})"
    if plan is not None:
        lines += ["", f"**Goal:** {plan.goal.main_objective}", "", "**Plan:**"]
        for subtask in plan.subtasks:
            mark = "x" if statuses.get(subtask.id) == "done" else " "
            lines.append(f"- [{mark}] {subtask.description or subtask.id}")
    if quality is not None:
        lines += ["", *gate_lines(quality)]
        if stored_result(quality) is GateResult.FAILED:
            lines += ["", str(quality.get("feedback", ""))]
    elif unfinished:
        lines = [UNFINISHED_NOTE, "", *lines, "", "**Quality gate:** not run (unfinished work)"]
    else:
        lines += ["", "**Quality gate:** not run (changes made through the forge API)"]
    lines += ["", "_Opened by the coding agent; please review before merging._"]
    return "\n".join(lines)


_VERDICTS = {
    GateResult.PASSED: "passed",
    GateResult.FAILED: "failed",
    GateResult.NOT_CONFIGURED: "no checks configured",
}


def _counts_text(counts: dict[str, Any]) -> str:
    return ", ".join(f"{value} {key}" for key, value in counts.items())


def gate_lines(quality: dict[str, Any]) -> list[str]:
    """The gate for a change request body: the result, then each step with its command,
    result and counts. Pure."""
    result = stored_result(quality) or GateResult.NOT_CONFIGURED
    lines = [f"**Quality gate:** {_VERDICTS[result]}", ""]
    for step in gate_steps(quality):
        command = f" `{step['command']}`" if step["command"] else ""
        counts = _counts_text(step["counts"])
        shown = step["status"].replace("_", " ") + (f" ({counts})" if counts else "")
        lines.append(f"- {step['name']}{command}: {shown}")
    return lines


def gate_view(quality: dict[str, Any]) -> dict[str, Any]:
    """The gate as the LINKS event carries it to the status comment: plain data."""
    result = stored_result(quality) or GateResult.NOT_CONFIGURED
    return {"result": result.value, "steps": gate_steps(quality)}
