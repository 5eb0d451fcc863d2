"""What the bot writes from the record: approval requests, the change request's body.
Pure. A refused push and a failed set-up are ``bot.record.failures``' (re-exported).


A tool call waiting for approval is shown with its FULL arguments as JSON in a
code fence (longer than any backtick run inside, so nothing closes it) in a
``<details>`` block; invisible, zero-width and bidirectional control characters
are shown as ``\\uXXXX`` escapes, so the text people read is the text that runs.
Arguments longer than ``MAX_SHOWN_CHARS`` are shown up to there, with a pointer to
the file that holds them whole. Lines outside the fence (a purpose, a goal) are
made plain: ``<`` cannot open an HTML comment or tag there.

``change_request_body`` links the issue, shows the goal and the plan checklist and the
gate (``gate_lines``: the result, then each step with its command, result and counts);
an unfinished delivery (the work saved when a run stops) says so first. ``gate_view``
is the gate as the LINKS event carries it to the status comment.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from bot.events import IssueRef
from bot.record.failures import SetupFailed as SetupFailed  # re-exported (the agent's)
from bot.record.failures import setup_failed as setup_failed
from bot.record.plan import PlanDocument
from bot.record.plan_rules import named_plan, pending_actions, plan_id
from bot.record.state import ActionRecord
from bot.run_events import SubtaskStatus
from bot.storage.run_report import code_fence
from bot.text import clip
from bot.tools.quality import GateResult, gate_steps, stored_result

MAX_SHOWN_CHARS = 4000
JUDGED_CHARS = 1200  # of the arguments and of the result shown for a person's judgement
_HIDING = frozenset({"Cf", "Cc", "Co", "Cs", "Zl", "Zp"})


def plain(text: str) -> str:
    """One line of model-written text, safe outside a code fence."""
    flat = " ".join(text.split())
    return "".join(_escape(ch) for ch in flat).replace("<", "&lt;")


def _escape(char: str) -> str:
    if unicodedata.category(char) in _HIDING:
        return json.dumps(char)[1:-1]  # \\uXXXX (a surrogate pair beyond the BMP)
    return char


def arguments_json(arguments: dict[str, Any]) -> str:
    """The arguments as indented JSON, every invisible character escaped."""
    text = json.dumps(arguments, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    return "".join(ch if ch == "\n" else _escape(ch) for ch in text)


def push_text(branch: str, paths: list[str], diff: str, *, saved_to: str = "") -> str:
    """The request to approve CI definitions in a push: the paths and their diff (cut;
    ``saved_to``: where the whole diff is, "-" when it could not be saved)."""
    lines = [
        "These CI definitions would be pushed to the branch "
        f"`{plain(branch)}`, where CI runs them with the repository's secrets:",
        "",
        *(f"- `{plain(p)}`" for p in paths),
        "",
        code_fence(clip(diff, MAX_SHOWN_CHARS, note="\n…"), "diff"),
    ]
    if len(diff) > MAX_SHOWN_CHARS:
        where = f" in `{saved_to}`" if saved_to and saved_to != "-" else " in the run directory"
        lines += ["", f"The diff is cut; the whole diff is{where}. Read it before you approve."]
    return "\n".join(lines)


def tool_call_text(
    tool: str, purpose: str, arguments: dict[str, Any], *, saved_to: str = ""
) -> str:
    """The details of a tool call approval request (Markdown)."""
    shown = arguments_json(arguments)
    cut = len(shown) > MAX_SHOWN_CHARS
    shown = clip(shown, MAX_SHOWN_CHARS, note="\n…")
    summary = f"Arguments of {plain(tool)} ({len(arguments)} keys)"
    lines = [plain(purpose)] if purpose.strip() else []
    lines += ["", f"<details open><summary>{summary}</summary>", "", code_fence(shown, "json")]
    lines += ["", "</details>"]
    if cut:
        where = f" in `{saved_to}`" if saved_to else " in the run directory"
        lines += [
            "",
            f"The arguments are {len(arguments_json(arguments)):,} characters long: only the "
            f"first {MAX_SHOWN_CHARS:,} are shown. The full arguments are{where}; read them "
            "before you approve.",
        ]
    return "\n".join(lines).strip()


def judgement_text(record: ActionRecord, doubt: str, facts: list[str]) -> str:
    """The details of a request for a person's judgement of a result (Markdown): the call,
    why it looks doubtful, what the bot checked itself, and the start of the result."""
    lines = [
        f"The model could not judge whether `{plain(record.key)}` ({plain(record.tool)}) did "
        f"what it should, and my own check leaves a doubt: {plain(doubt)}.",
        "",
        f"<details><summary>Arguments of {plain(record.tool)}</summary>",
        "",
        code_fence(clip(arguments_json(record.arguments), JUDGED_CHARS, note="\n…"), "json"),
        "",
        "</details>",
        "",
        "What I checked myself:",
        *(f"- {plain(line.splitlines()[0])}" for line in facts if line.strip()),
        "",
        "The result:",
        code_fence(clip(record.output, JUDGED_CHARS, note="\n…")),
        "",
        "Approve if the result is right (I go on with the plan); reject with a reason if "
        "not (I revise the plan with it).",
    ]
    return "\n".join(lines).strip()


# --- approvals --------------------------------------------------------------------------------


def plan_text(plan: PlanDocument | None, finished: set[str], digest: str = "") -> str:
    """The plan an approval request shows: the goal, the actions still to run, and the
    plan's id (an approval counts for that plan only)."""
    if plan is None:
        return ""
    lines = [f"Goal: {plain(plan.goal.main_objective)}"]
    lines += [
        f"- {plain(a.key)}: {plain(a.tool)} - {plain(a.purpose)}"
        for a in pending_actions(plan, finished)
    ]
    if digest:
        lines += ["", f"Plan `{plan_id(digest)}`: an approval counts for this plan only."]
    return "\n".join(lines)


def stale_text(authors: list[str], what: str) -> str:
    """What the bot says about approvals sent before it asked to approve ``what`` (or,
    with ``what`` empty, while it waited for no approval)."""
    named = ", ".join(sorted({f"@{a}" for a in authors if a})) or "someone"
    if not what:
        return (
            f"The approval by {named} came while I waited for no approval, so it approves "
            "nothing; I ask again whenever a plan or a call needs your approval."
        )
    return (
        f"The approval by {named} was sent before I asked to approve {what}, so it does not "
        "approve it. Read the request above and approve again if it is right."
    )


def other_plan_text(author: str, args: str, digest: str, what: str) -> str:
    """What the bot says when ``/agent approve <id>`` names a plan that is not waiting."""
    named = named_plan(args) or args
    return (
        f"@{author} approved plan `{named}`, but the plan waiting now is `{plan_id(digest)}` "
        f"({what}): it is not approved. Read it above and approve it if it is right."
    )


def best_guess_text(plan: PlanDocument, digest: str) -> str:
    """The best-guess plan as the clarification shows it: goal, assumptions, actions."""
    goal = plan.goal
    lines = [f"Goal: {plain(goal.main_objective)}"]
    if goal.context:
        lines.append(f"Assumptions: {plain(goal.context)}")
    lines += [f"- {plain(a.key)}: {plain(a.tool)} - {plain(a.purpose)}" for a in plan.actions]
    lines += ["", f"Plan `{plan_id(digest)}`: an approval counts for this plan only."]
    return "\n".join(lines)


# --- the change request -------------------------------------------------------------------------

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
            mark = "x" if statuses.get(subtask.id) == SubtaskStatus.DONE else " "
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
