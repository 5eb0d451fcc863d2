"""Milestone comments: progress events a person must notice, rendered. Pure."""

from __future__ import annotations

import re
from typing import Any

from bot.comments.render import render
from bot.comments.status import render_links
from bot.comments.wording import approval_subject, verdict_label
from bot.run_events import (
    ApprovalAsked,
    ClarificationAsked,
    Completed,
    InterventionNeeded,
    Notice,
    Paused,
    PauseReason,
    ProgressEvent,
    Reflected,
    Revised,
    SettingsRefused,
)


def _strings(items: object) -> list[str]:
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        if isinstance(item, dict):
            parts = [f"{k}: {v}" for k, v in item.items() if not isinstance(v, (dict, list))]
            out.append("; ".join(parts) or str(item))
        else:
            out.append(str(item))
    return out


def _duration(seconds: object, language: str) -> str:
    try:
        value = int(float(str(seconds)))
    except ValueError:
        value = 0
    if value >= 3600 and value % 3600 == 0:
        return f"{value // 3600} h" if language == "en" else f"{value // 3600} 時間"
    if value >= 60:
        return f"{value // 60} min" if language == "en" else f"{value // 60} 分"
    return f"{value} s" if language == "en" else f"{value} 秒"


def milestone_body(
    event: ProgressEvent, language: str, *, prefix: str, links: dict[str, str]
) -> str | None:
    """The comment for a milestone event, or None for status-only events."""
    match event:
        case Revised():
            return render(
                "revision",
                language,
                number=event.number,
                limit=event.limit,
                reason=event.reason,
                changes=_strings(event.changes),
            )
        case Reflected():
            evaluation = event.evaluation
            return render(
                "reflection",
                language,
                action=event.action,
                status=verdict_label(event.status, language),
                evaluation=evaluation,
                issues=[i for i in _strings(event.issues) if i.strip() != evaluation.strip()],
            )
        case ClarificationAsked():
            return render(
                "clarification",
                language,
                questions=_strings(event.questions),
                best_guess=event.best_guess,
                prefix=prefix,
            )
        case ApprovalAsked():
            return render(
                "approval_request",
                language,
                what=approval_subject(event, language),
                details=event.details,
                prefix=prefix,
                timeout=_duration(event.timeout, language),
            )
        case Paused():
            return render("paused", language, reason=pause_reason(event, language, prefix=prefix))
        case Completed():
            summary = event.summary
            return render(
                "completion",
                language,
                completed=summary.get("tasks_completed", 0),
                failed=summary.get("tasks_failed", 0),
                outcomes=_strings(summary.get("key_outcomes")),
                criteria=_strings(summary.get("criteria")),
                lessons=_strings(summary.get("lessons_learned")),
                links=render_links(links, language),
                report=event.report,
            )
        case InterventionNeeded():
            summary = event.summary
            return render(
                "human_intervention",
                language,
                prefix=prefix,
                reason=summary.get("reason") or event.reason,
                tried=_strings(event.tried),
                current_state=summary.get("current_state", ""),
                criteria=_strings(summary.get("criteria")),
                partial_plan=partial_plan_lines(event.partial_plan, language),
                recommendations=_strings(summary.get("recommendations")),
                setup=setup_failure(event.setup),
                links=render_links(links, language),
                report=event.report,
            )
        case Notice():
            return render("notice", language, text=event.text)
        case SettingsRefused():
            items = [refused_item(item, language) for item in event.refused]
            return render("settings_refused", language, items=items) if items else None
    return None


def setup_failure(data: object) -> dict[str, Any] | None:
    """The failing set-up command and the tail of its output, with a code fence longer
    than any run of backticks in the output (so the output cannot close it)."""
    if not isinstance(data, dict):
        return None
    tail = str(data.get("tail", ""))
    longest = max((len(run) for run in re.findall(r"`+", tail)), default=0)
    return {
        "command": str(data.get("command", "")).replace("`", "'"),
        "exit_code": data.get("exit_code", ""),
        "timed_out": bool(data.get("timed_out")),
        "tail": tail,
        "fence": "`" * max(3, longest + 1),
    }


_PARTS = (
    ("feasible_subtasks", "partial_feasible"),
    ("infeasible_subtasks", "partial_infeasible"),
    ("alternative_approaches", "partial_alternative"),
)


def partial_plan_lines(partial: object, language: str) -> list[str]:
    """A failed decomposition's partial plan: what is feasible, what is not, and the
    alternatives, one line each."""
    if not isinstance(partial, dict):
        return []
    lines = []
    for key, template in _PARTS:
        for item in partial.get(key) or []:
            text = item.get("description") or item.get("id") if isinstance(item, dict) else item
            if text:
                lines.append(render(template, language, text=str(text)))
    return lines


def _short(value: object, limit: int = 80) -> str:
    text = str(value).replace("`", "'").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def refused_item(item: dict[str, Any], language: str) -> dict[str, str]:
    """One refused setting (``bot.config.overrides.Refusal`` as data), in words."""
    layer = "user" if item.get("layer") == "user" else "repository"
    reason = str(item.get("reason", "invalid"))
    limit_from = "repository" if item.get("limit_from") == "repository" else "server"
    why = render(
        f"refused_{reason}" if reason in REFUSAL_REASONS else "refused_invalid",
        language,
        limit=_short(item.get("limit")),
        limit_from=render(f"limit_from_{limit_from}", language),
        detail=_short(item.get("detail", ""), 200),
    )
    return {
        "key": _short(item.get("key", "")),
        "value": _short(item.get("value")),
        "source": render(f"refused_from_{layer}", language, user=_short(item.get("user", ""))),
        "why": why,
    }


REFUSAL_REASONS = frozenset(
    ("above_limit", "only_towards_true", "only_towards_false", "server_only", "unknown_key")
)


def pause_reason(event: Paused, language: str, *, prefix: str) -> str:
    """Why the task is paused, in words; a reason that is not a ``PauseReason`` (a
    person's own words) is shown as it is."""
    try:
        reason = PauseReason(event.reason)
    except ValueError:
        return event.reason
    if reason is PauseReason.LLM_UNAVAILABLE:
        return render("paused_llm", language, endpoint=event.endpoint, steps=event.setup_steps)
    if reason is PauseReason.APPROVAL_TIMEOUT:
        return render("paused_approval", language, prefix=prefix)
    if reason is PauseReason.STORE:
        return render("paused_store", language)
    return render("paused_user", language, prefix=prefix, by=event.by)
