"""Compact histories of executed actions, and what is left of the plan, for prompts.

``compact_results`` renders executed actions within a token budget, newest in full,
older ones as one line; a call and its result are never separated. ``done_text`` and
``remaining_text`` are what reflection and revision prompts show of the run. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bot.agent.plan import PlanDocument
from bot.agent.plan_rules import pending_actions
from bot.agent.state import ActionRecord
from bot.llm.tokens import count_tokens
from bot.text import clip

ONE_LINE_CHARS = 160
REMAINING_LINES = 8


def _arguments_brief(arguments: dict[str, Any]) -> str:
    parts = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else repr(value)
        text = text.replace("\n", " ")
        parts.append(f"{key}={clip(text, 40, note='...')}")
    return ", ".join(parts)


def one_line(record: ActionRecord) -> str:
    text = f"(summary) {record.summary}" if record.summary else record.output
    text = text.strip().replace("\n", " ")
    text = clip(text, ONE_LINE_CHARS, note="...", fit=True)
    return (
        f"- [{record.key}] {record.tool}({_arguments_brief(record.arguments)}) "
        f"-> {record.status.value}: {text}"
    )


def full_entry(record: ActionRecord, max_chars: int) -> str:
    output = clip(record.output, max_chars)
    if record.summary and len(record.output) > max_chars:
        output = f"(summary) {record.summary}\n{output}"
    return (
        f"- [{record.key}] {record.tool}({_arguments_brief(record.arguments)}) "
        f"-> {record.status.value}:\n{output}"
    )


def compact_results(
    records: Sequence[ActionRecord],
    *,
    budget_tokens: int,
    count: Callable[[str], int],
    detail_chars: int = 6000,
) -> str:
    """Executed actions, oldest first, within ``budget_tokens``: the newest in full
    while they fit, older ones as one line each, the oldest dropped last of all."""
    entries: list[str] = []
    used = 0
    detailed = True
    for record in reversed(records):
        entry = full_entry(record, detail_chars) if detailed else one_line(record)
        cost = count(entry)
        if detailed and used + cost > budget_tokens:
            detailed = False
            entry = one_line(record)
            cost = count(entry)
        if used + cost > budget_tokens:
            entries.append(f"- ({len(records) - len(entries)} earlier actions omitted)")
            break
        entries.append(entry)
        used += cost
    return "\n".join(reversed(entries)) if entries else "(no actions yet)"


def done_text(records: Sequence[ActionRecord]) -> str:
    """What the run did so far, for a reflection or revision prompt."""
    return compact_results(records, budget_tokens=500, count=count_tokens)


def remaining_text(plan: PlanDocument | None, finished: set[str]) -> str:
    """The plan's actions not finished yet, a few lines at most."""
    if plan is None:
        return ""
    pending = pending_actions(plan, finished)
    lines = [f"- [{a.key}] {a.tool}: {a.purpose}" for a in pending[:REMAINING_LINES]]
    if len(pending) > REMAINING_LINES:
        lines.append(f"- ... {len(pending) - REMAINING_LINES} more")
    return "\n".join(lines) or "(nothing left)"
