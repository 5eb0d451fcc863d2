"""Planning history (seed 004, 11.3.1): one append-only JSONL file per task.

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
from pathlib import Path
from typing import Any

ENTRY_TYPES = frozenset(
    {
        "plan",
        "plan_rejected",
        "revision",
        "reflection",
        "action",
        "human_feedback",
        "approval",
        "clarification",
        "command",
        "completion",
        "usage",
        "paused",
        "quality",
    }
)


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

    def append(self, entry_type: str, **fields: Any) -> dict[str, Any]:
        if entry_type not in ENTRY_TYPES:
            raise ValueError(f"unknown history entry type {entry_type!r}")
        entry = {"type": entry_type, "timestamp": iso(self._clock()), **fields}
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


def _describe(entry: dict[str, Any]) -> str:
    kind = entry["type"]
    if kind == "plan":
        actions = entry.get("plan", {}).get("action_plan", {}).get("actions", [])
        source = " (from cache)" if entry.get("cached") else ""
        objective = entry.get("plan", {}).get("goal_understanding", {}).get("main_objective", "")
        return f"plan{source}: {objective} ({len(actions)} actions)"
    if kind == "action":
        state = "ok" if entry.get("ok") else "failed"
        took = f" in {entry['duration']:.2f} s" if "duration" in entry else ""
        return f"action {entry.get('key', '')} {entry.get('tool', '')}: {state}{took}"
    if kind == "revision":
        return f"revision {entry.get('number', '')}: {entry.get('reason', '')}"
    if kind == "reflection":
        evaluation = entry.get("evaluation", {})
        return (
            f"reflection on {entry.get('action', '')}: {evaluation.get('status', '?')}"
            f"{' (revision needed)' if evaluation.get('plan_revision_needed') else ''}"
        )
    if kind == "usage":
        return (
            f"usage {entry.get('phase', '')}: {entry.get('prompt_tokens', 0)} prompt + "
            f"{entry.get('completion_tokens', 0)} answer tokens ({entry.get('calls', 0)} calls)"
        )
    if kind == "quality":
        verdict = "passed" if entry.get("passed") else "failed"
        return f"quality gate run {entry.get('run', '')}: {verdict}"
    if kind == "completion":
        return f"completion: {entry.get('status', '')}"
    detail = entry.get("reason") or entry.get("decision") or entry.get("body") or ""
    return f"{kind}: {str(detail)[:120]}".rstrip(": ")


def format_timeline(path: Path) -> str:
    """One line per entry: time, then what happened."""
    if not path.exists():
        raise HistoryError(f"{path}: no planning history for this task")
    lines = [f"{entry.get('timestamp', '?')}  {_describe(entry)}" for entry in read_entries(path)]
    return "\n".join(lines) if lines else "(empty history)"
