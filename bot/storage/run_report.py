"""A run's report.md: the task, its changes, the quality gate, the planning settings,
the conversation's summary and the artifacts, as Markdown. Pure, so it can be tested and
previewed without a run directory (``RunDirectory.write_report`` writes it). Its code
fence is the one every text of the bot uses (``bot.record.texts``)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

_BACKTICKS = re.compile(r"`+")
_LONG_KEYS = ("description", "body", "instruction", "instructions")


def code_fence(text: str, language: str = "") -> str:
    """``text`` in a code fence longer than any backtick run inside it: nothing closes it."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{text}\n{ticks}"


def _task_section(task: dict[str, Any]) -> list[str]:
    lines = []
    for key, value in task.items():
        if key not in _LONG_KEYS and isinstance(value, str | int | float | bool):
            lines.append(f"- **{key}**: {value}")
    for key in _LONG_KEYS:
        if task.get(key):
            lines += ["", str(task[key]).strip()]
    return lines or ["(no task details)"]


def _quality_section(quality: dict[str, Any] | None) -> list[str]:
    if quality is None:
        return ["The quality gate did not run."]
    verdict = quality.get("result") or ("passed" if quality.get("passed") else "failed")
    shown = "no checks configured" if verdict == "not_configured" else verdict
    lines = [
        f"Result: **{shown}**",
        "",
        "| Step | Status | Command | Counts |",
        "|---|---|---|---|",
    ]
    for name in ("lint", "test"):
        step = quality.get(name) or {}
        command = " ".join(step.get("command") or []) or "-"
        counts = ", ".join(f"{k}: {v}" for k, v in (step.get("counts") or {}).items()) or "-"
        lines.append(f"| {name} | {step.get('status', '-')} | `{command}` | {counts} |")
    if verdict == "failed" and quality.get("feedback"):
        lines += ["", code_fence(str(quality["feedback"]).rstrip())]
    return lines


def render_report(
    *,
    task: dict[str, Any],
    changes: list[str],
    diff_stat: str,
    quality: dict[str, Any] | None,
    conversation_summary: str,
    outcome: str,
    artifacts: list[str],
    settings: list[str] | None = None,
    memo: list[str] | None = None,
) -> str:
    """report.md: pure, so it can be tested and previewed without a run directory."""
    title = task.get("title") or task.get("id") or "task"
    lines = [f"# Run report: {title}", "", f"**Outcome:** {outcome}", "", "## Task", ""]
    lines += _task_section(task)
    lines += ["", "## Changes", ""]
    lines += [f"- `{path}`" for path in changes] or ["No files changed."]
    if diff_stat.strip():
        lines += ["", code_fence(diff_stat.rstrip())]
    lines += ["", "## Quality gate", "", *_quality_section(quality)]
    if settings:
        lines += ["", "## Planning settings", "", *settings]
    lines += ["", "## Conversation summary", "", conversation_summary.strip() or "(none)"]
    if memo:  # the notes the agent kept for itself (the memo tool)
        lines += [
            "",
            "## Memo",
            "",
            *(f"{n}. {' '.join(e.split())}" for n, e in enumerate(memo, 1)),
        ]
    lines += ["", "## Artifacts", ""]
    lines += [f"- [`{name}`](artifacts/{quote(name)})" for name in artifacts] or ["None."]
    return "\n".join(lines) + "\n"
