"""Planning history (docs/planning.md#planning-history): one append-only JSONL file per task.

``data_dir/planning_history/{task_uuid}.jsonl`` holds one entry per line, each with
a ``type`` (plan, revision, reflection, action, human_feedback, approval,
completion, usage, ...) and an ISO 8601 UTC ``timestamp``. Nothing is kept in
memory. ``format_timeline`` renders a file for ``bot history TASK``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from bot.events import CommandName
from bot.text import clip
from bot.tools.quality import GateResult


class HistoryKind(StrEnum):
    """An entry's ``type`` (the strings are the file format)."""

    PLAN = "plan"
    PLAN_REJECTED = "plan_rejected"
    REVISION = "revision"
    REFLECTION = "reflection"
    ACTION = "action"
    HUMAN_FEEDBACK = "human_feedback"
    APPROVAL = "approval"
    CLARIFICATION = "clarification"
    COMMAND = "command"
    COMPLETION = "completion"
    USAGE = "usage"
    PAUSED = "paused"
    QUALITY = "quality"
    SETUP = "setup"
    EVIDENCE = "evidence"


ENTRY_TYPES = frozenset(HistoryKind)


class ApprovalVerdict(StrEnum):
    """An approval entry's ``decision``."""

    REQUESTED = "requested"
    APPROVED = "approved"
    REJECTED = "rejected"
    TIMED_OUT = "timed out"

    @classmethod
    def of(cls, approved: bool) -> ApprovalVerdict:
        return cls.APPROVED if approved else cls.REJECTED


class ReflectionStatus(StrEnum):
    """A reflection's verdict on a result (the ``reflection`` document's ``status``)."""

    SUCCESS = "success"
    PARTIAL = "partial"
    FAILURE = "failure"
    # Not the model's: nobody could judge the result, and the bot's own evidence showed no
    # problem, so the task went on without counting the result as confirmed.
    UNJUDGED = "unjudged"


class CompletionStatus(StrEnum):
    """A completion entry's ``status``."""

    COMPLETED = "completed"
    NEEDS_PERSON = "requires_human_intervention"
    PUSH_FAILED = "push_failed"
    CHANGE_REQUEST_FAILED = "change_request_failed"


class HistoryError(Exception):
    """A history file cannot be read or holds a line that is not an entry."""


def history_path(data_dir: Path, task_id: str) -> Path:
    if not task_id or "/" in task_id or "\\" in task_id or task_id.startswith("."):
        raise ValueError(f"not a task id: {task_id!r}")
    return data_dir / "planning_history" / f"{task_id}.jsonl"


def iso(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class PlanningHistory:
    """Appends entries to one task's history file."""

    def __init__(
        self, data_dir: Path, task_id: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = history_path(data_dir, task_id)
        self._clock = clock

    def append(self, kind: HistoryKind, **fields: Any) -> dict[str, Any]:
        if kind not in ENTRY_TYPES:
            raise ValueError(f"unknown history entry type {kind!r}")
        entry = {"type": HistoryKind(kind).value, "timestamp": iso(self._clock()), **fields}
        line = json.dumps(entry, ensure_ascii=False, default=str)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        return entry

    def entries(self) -> list[dict[str, Any]]:
        return list(read_entries(self.path)) if self.path.exists() else []


def read_entries(path: Path) -> Iterator[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise HistoryError(f"{path}: cannot read: {exc.strerror}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            raise HistoryError(f"{path}:{number}: not a JSON line") from None
        if not isinstance(entry, dict) or "type" not in entry:
            raise HistoryError(f"{path}:{number}: not a history entry")
        yield entry


def _kind(entry: dict[str, Any]) -> HistoryKind | None:
    try:
        return HistoryKind(str(entry["type"]))
    except ValueError:  # an entry of a newer or older version: described plainly
        return None


def describe_entry(entry: dict[str, Any]) -> str:
    match _kind(entry):
        case HistoryKind.PLAN:
            actions = entry.get("plan", {}).get("action_plan", {}).get("actions", [])
            source = " (from cache)" if entry.get("cached") else ""
            goal = entry.get("plan", {}).get("goal_understanding", {})
            return f"plan{source}: {goal.get('main_objective', '')} ({len(actions)} actions)"
        case HistoryKind.ACTION:
            state = "ok" if entry.get("ok") else "failed"
            took = f" in {entry['duration']:.2f} s" if "duration" in entry else ""
            return f"action {entry.get('key', '')} {entry.get('tool', '')}: {state}{took}"
        case HistoryKind.REVISION:
            return f"revision {entry.get('number', '')}: {entry.get('reason', '')}"
        case HistoryKind.REFLECTION:
            evaluation = entry.get("evaluation", {})
            return (
                f"reflection on {entry.get('action', '')}: {evaluation.get('status', '?')}"
                f"{' (revision needed)' if evaluation.get('plan_revision_needed') else ''}"
            )
        case HistoryKind.USAGE:
            cached = entry.get("cached_tokens")
            return (
                f"usage {entry.get('phase', '')}: {entry.get('prompt_tokens', 0)} prompt "
                f"{f'({cached} cached) ' if cached else ''}+ "
                f"{entry.get('completion_tokens', 0)} answer tokens ({entry.get('calls', 0)} calls)"
            )
        case HistoryKind.QUALITY:
            verdict = entry.get("result") or ("passed" if entry.get("passed") else "failed")
            return f"quality gate run {entry.get('run', '')}: {str(verdict).replace('_', ' ')}"
        case HistoryKind.COMPLETION:
            return f"completion: {entry.get('status', '')}"
        case HistoryKind.SETUP:
            steps, took = entry.get("steps") or [], entry.get("duration", 0)
            return f"set-up {entry.get('status', '')}: {len(steps)} commands in {took} s"
        case HistoryKind.EVIDENCE:
            problems = "; ".join(map(str, entry.get("problems") or []))
            return "evidence: " + (f"the record disagrees: {problems}" if problems else "agrees")
    detail = entry.get("reason") or entry.get("decision") or entry.get("body") or ""
    return f"{entry['type']}: {str(detail)[:120]}".rstrip(": ")


def format_timeline(path: Path) -> str:
    """One line per entry: time, then what happened."""
    if not path.exists():
        raise HistoryError(f"{path}: no planning history for this task")
    lines = [
        f"{entry.get('timestamp', '?')}  {describe_entry(entry)}" for entry in read_entries(path)
    ]
    return "\n".join(lines) if lines else "(empty history)"


# --- a retry knows the last attempt ----------------------------------------------------------

SUMMARY_LINES = 24
SUMMARY_TEXT = 200


def _short(value: object, limit: int = SUMMARY_TEXT) -> str:
    return clip(" ".join(str(value).split()), limit, note="…", fit=True)


def _failed_gate(entry: dict[str, Any]) -> bool:
    result = entry.get("result") or GateResult.FAILED
    return result == GateResult.FAILED and not entry.get("passed")


def _attempt_line(entry: dict[str, Any]) -> str | None:
    """One line of a previous attempt worth a new planner's attention, or None."""
    evaluation = entry.get("evaluation") or {}
    match _kind(entry):
        case HistoryKind.PLAN:
            return describe_entry(entry)
        case HistoryKind.ACTION if not entry.get("ok"):
            arguments = _short(entry.get("arguments", ""), 80)
            return f"failed: {entry.get('tool', '')}({arguments}) -> " + _short(
                entry.get("result", "")
            )
        case HistoryKind.REVISION:
            return f"revision {entry.get('number', '')}: {_short(entry.get('reason', ''))}"
        case HistoryKind.REFLECTION if evaluation.get("status") != ReflectionStatus.SUCCESS:
            issues = "; ".join(map(str, evaluation.get("issues") or [])) or evaluation.get(
                "evaluation", ""
            )
            return f"reflection on {entry.get('action', '')}: {_short(issues)}"
        case HistoryKind.HUMAN_FEEDBACK:
            return f"feedback from {entry.get('author', '')}: {_short(entry.get('body', ''))}"
        case HistoryKind.APPROVAL if entry.get("decision") == ApprovalVerdict.REJECTED:
            return f"{entry.get('subject', '')} rejected by {entry.get('author', '')}: " + _short(
                entry.get("reason", "")
            )
        case HistoryKind.COMMAND if entry.get("name") in (CommandName.STOP, CommandName.PAUSE):
            return f"{entry['name']} by {entry.get('author', '')}"
        case HistoryKind.QUALITY if _failed_gate(entry):
            return f"quality gate failed: {_short(entry.get('feedback', ''))}"
    return None


def _ending(entries: list[dict[str, Any]]) -> str:
    ends = [e for e in entries if _kind(e) is HistoryKind.COMPLETION and e.get("summary")]
    if not ends:
        return "It ended without a completion report (stopped, paused or interrupted)."
    summary = ends[-1]["summary"]
    achieved = "the goal was achieved" if summary.get("goal_achieved") else "goal not achieved"
    text = f"It ended: {ends[-1].get('status', '')}, {achieved}"
    if summary.get("reason"):
        text += f"; reason: {_short(summary['reason'])}"
    recommendations = summary.get("recommendations") or []
    if recommendations:
        text += "; recommended: " + "; ".join(_short(r, 120) for r in recommendations[:3])
    return text + "."


def summarise_attempt(entries: list[dict[str, Any]]) -> str:
    """A short account of an attempt's planning history: its plans, failures, revisions,
    what people said, and how it ended. Pure."""
    if not entries:
        return ""
    lines = [line for e in entries if (line := _attempt_line(e)) is not None]
    if len(lines) > SUMMARY_LINES:
        skipped = len(lines) - SUMMARY_LINES
        lines = [*lines[:4], f"... {skipped} more entries", *lines[-(SUMMARY_LINES - 4) :]]
    return "\n".join([*(f"- {line}" for line in lines), _ending(entries)])


def previous_attempt(data_dir: Path, task_id: str) -> str:
    """The summary of an earlier task's history ("" when it left none or is unreadable)."""
    try:
        path = history_path(data_dir, task_id)
        if not path.exists():
            return ""
        return summarise_attempt(list(read_entries(path)))
    except (ValueError, HistoryError):
        return ""
