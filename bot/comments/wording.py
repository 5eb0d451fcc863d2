"""Words the agent hands over as data, said in the comment's language. Pure.

The coordinator names what a task waits for (``subject``: plan, revision, tool,
clarification, judgement), its phase and a reflection's verdict as plain identifiers; these
helpers turn them into the template language's words, and fall back to the text
given when a name has no template (so nothing is ever lost).
"""

from __future__ import annotations

from typing import Any

from bot.comments.render import excerpt, render, template_keys
from bot.events import FollowUpRound, RoundKind
from bot.run_events import ApprovalAsked, WaitKind

SUBJECTS = (WaitKind.PLAN, WaitKind.REVISION, WaitKind.TOOL, WaitKind.ANSWERS, WaitKind.JUDGEMENT)


def _known(key: str, language: str) -> bool:
    return key in template_keys(language)


def _values(waiting: dict[str, Any]) -> dict[str, Any]:
    number = waiting.get("number") or 0
    return {"tool": str(waiting.get("tool") or ""), "number": int(number)}


def waiting_label(waiting: dict[str, Any], language: str) -> str:
    """What the task waits on people for, for the status comment ("" when nothing)."""
    subject = str(waiting.get("subject") or "")
    if subject in SUBJECTS and (subject != WaitKind.TOOL or waiting.get("tool")):
        return render(f"waiting_{subject}", language, **_values(waiting))
    return str(waiting.get("what") or subject)


def approval_subject(event: ApprovalAsked, language: str) -> str:
    """The first line of an approval request: what is to be approved."""
    subject = event.subject
    plain = (WaitKind.PLAN, WaitKind.REVISION, WaitKind.JUDGEMENT)
    if subject in plain or (subject is WaitKind.TOOL and event.tool):
        return render(f"approve_{subject}", language, tool=event.tool, number=event.number)
    what = event.what
    return what[:1].upper() + what[1:]


def phase_label(phase: str, language: str) -> str:
    key = f"phase_{phase}"
    return render(key, language) if phase and _known(key, language) else phase


def verdict_label(status: str, language: str) -> str:
    """A reflection's status (success / partial / failure)."""
    key = f"verdict_{status}"
    return render(key, language) if status and _known(key, language) else status


def gate_text(gate: dict[str, Any], language: str) -> str:
    """The quality gate (the LINKS event's ``gate``: result and steps with command,
    status, counts) in the comment's language ("" when the gate did not run)."""
    result = str(gate.get("result") or "")
    if not result:
        return ""
    steps = []
    for step in gate.get("steps") or []:
        if not isinstance(step, dict):
            continue
        counts = step.get("counts") or {}
        steps.append(
            {
                "name": _word(f"step_{step.get('name', '')}", language),
                "command": str(step.get("command") or ""),
                "status": _word(f"step_{step.get('status', '')}", language),
                "counts": ", ".join(_count(str(k), v, language) for k, v in counts.items()),
            }
        )
    return render("gate", language, result=_word(f"gate_{result}", language), steps=steps)


def _word(key: str, language: str) -> str:
    return render(key, language) if _known(key, language) else key.split("_", 1)[-1]


def _count(name: str, value: object, language: str) -> str:
    key = f"count_{name}"
    return render(key, language, n=value) if _known(key, language) else f"{value} {name}"


ROUND_LABELS = {RoundKind.CI: "round_ci", RoundKind.REVIEW: "round_review",
                RoundKind.BASE: "round_base"}  # fmt: skip


def round_text(found: FollowUpRound, language: str) -> str:
    """What a round's own status comment says it is: its kind and number, the head commit
    it answers, and what it answers (the failed checks, the threads, the base)."""
    about = ", ".join(found.checks)
    if found.kind is RoundKind.REVIEW:
        about = render("round_threads", language, n=len(found.threads), unanswered=0)
    elif found.kind is RoundKind.BASE:
        about = found.base_branch
    return render(
        "round_status",
        language,
        label=render(ROUND_LABELS[found.kind], language, number=found.number),
        head=found.head_sha[:7],
        about=excerpt(about, limit=160),
    )
