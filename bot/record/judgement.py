"""Judging results (docs/planning.md#reflection, #unexpected-results). Pure: no I/O.

``should_reflect`` says why to reflect on a result (an error, an unexpected result, the
periodic look) and ``periodic_interval`` how often the periodic look comes: with
``auto_adjust_level``, by the task's size (simple: never, moderate: every 5 actions,
complex: every 3; specification 11.1.3). ``unexpected_result`` says what makes a
successful result not what the plan meant: a write that left the paths it meant to
change unchanged, or changed others, or changed nothing; an empty answer where an
outcome was expected. ``unmet_precondition`` re-checks, once an earlier action failed,
what an action needs before it runs: its dependencies succeeded, the file it reads
exists. ``evaluation_from`` reads the model's ``reflection`` document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.config import PlanningSettings, ReflectionSettings
from bot.record.history import ReflectionStatus
from bot.record.plan import Complexity, PlanDocument, PlannedAction
from bot.record.state import ActionRecord

# Reflection every N actions by the task's size (specification 11.1.3); 0: errors only.
PERIODIC_BY_COMPLEXITY = {Complexity.SIMPLE: 0, Complexity.MODERATE: 5, Complexity.COMPLEX: 3}
# Tools that need a path to exist before they run, and the argument that names it.
NEEDS_EXISTING = {
    "read_file": "path",
    "replace_in_file": "path",
    "delete_file": "path",
    "move_path": "source",
}
SHOWN_PATHS = 5


class Trigger(StrEnum):
    """Why a result is reflected on (the reflection prompt's ``trigger``)."""

    ERROR = "error"
    UNEXPECTED = "unexpected"
    PERIODIC = "periodic"


class Unjudged(StrEnum):
    """What to do when neither the model nor the bot's own evidence can vouch for a
    result (``planning.reflection.unjudged``)."""

    ASK = "ask"  # ask the author (a JUDGEMENT wait)
    REVISE = "revise"  # judge it a failure and revise the plan (counts as a revision)


@dataclass(frozen=True, slots=True)
class Evaluation:
    action: str
    status: ReflectionStatus
    evaluation: str = ""
    issues: tuple[str, ...] = ()
    plan_revision_needed: bool = False
    plan_revision: dict[str, Any] | None = None
    success_criteria_met: bool = False
    conservative: bool = False  # no valid reflection: the bot's judgement, not the model's

    @property
    def failed(self) -> bool:
        return self.status is not ReflectionStatus.SUCCESS

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "status": self.status.value,
            "evaluation": self.evaluation,
            "issues": list(self.issues),
            "plan_revision_needed": self.plan_revision_needed,
            "success_criteria_met": self.success_criteria_met,
            "conservative": self.conservative,
        }


def _status(value: object) -> ReflectionStatus:
    try:
        status = ReflectionStatus(str(value))
    except ValueError:  # the schema allows no other status; never a crash
        return ReflectionStatus.FAILURE
    return ReflectionStatus.FAILURE if status is ReflectionStatus.UNJUDGED else status


def conservative(action: str) -> Evaluation:
    """No valid reflection: judged a failure that needs a revision (#conservative-judgement)."""
    return Evaluation(
        action=action,
        status=ReflectionStatus.FAILURE,
        evaluation="the result could not be evaluated (no valid reflection); treated as a failure",
        issues=("evaluation impossible",),
        plan_revision_needed=True,
        conservative=True,
    )


def evaluation_from(data: Mapping[str, Any] | None, action: str) -> Evaluation:
    """The model's reflection document as an evaluation (None: the conservative one)."""
    if data is None:
        return conservative(action)
    reflection = data.get("reflection") or {}
    revision = data.get("plan_revision")
    return Evaluation(
        action=action,
        status=_status(reflection.get("status", ReflectionStatus.FAILURE)),
        evaluation=str(reflection.get("evaluation") or reflection.get("root_cause_analysis", "")),
        issues=tuple(str(i) for i in reflection.get("issues_identified") or ()),
        plan_revision_needed=bool(reflection.get("plan_revision_needed", False)),
        plan_revision=dict(revision) if isinstance(revision, Mapping) else None,
        success_criteria_met=reflection.get("success_criteria_met") is True,
    )


def _listed(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:SHOWN_PATHS])
    return shown + (f" and {len(paths) - SHOWN_PATHS} more" if len(paths) > SHOWN_PATHS else "")


def unexpected_result(action: PlannedAction | None, record: ActionRecord) -> str:
    """Why a successful result is not what the plan meant ("" when nothing says so)."""
    if not record.ok or action is None:
        return ""
    if record.unchanged_paths:
        return f"it meant to change {_listed(record.unchanged_paths)}, which is unchanged"
    if record.unexpected_paths:
        return f"it changed {_listed(record.unexpected_paths)}, which it did not mean to change"
    if record.writes and not record.changed:
        return "the write changed nothing"
    if action.expected_outcome and not record.output.strip():
        return "the result is empty where an outcome was expected"
    return ""


def periodic_interval(planning: PlanningSettings, complexity: Complexity | None) -> int:
    """Actions between periodic reflections (0: none). ``trigger_interval: 0`` turns them
    off; with ``auto_adjust_level`` the task's size sets the interval."""
    interval = planning.reflection.trigger_interval
    if interval == 0 or not planning.auto_adjust_level or complexity is None:
        return interval
    return PERIODIC_BY_COMPLEXITY[complexity]


def should_reflect(
    settings: ReflectionSettings,
    record: ActionRecord,
    *,
    differs: bool,
    since_last: int,
    interval: int | None = None,
) -> Trigger | None:
    """Why to reflect on ``record`` now, or None. ``interval``: actions between periodic
    reflections (default ``settings.trigger_interval``; 0: none)."""
    if not settings.enabled:
        return None
    if not record.ok:
        return Trigger.ERROR if settings.trigger_on_error else None
    if differs:
        return Trigger.UNEXPECTED
    every = settings.trigger_interval if interval is None else interval
    if every > 0 and since_last >= every:
        return Trigger.PERIODIC
    return None


def failure_signature(record: ActionRecord) -> str:
    """The tool and the first line of its error: "the same failure"."""
    first = (record.output.strip().splitlines() or [""])[0].strip().lower()
    return f"{record.tool}|{first[:200]}"


def unmet_precondition(
    action: PlannedAction,
    plan: PlanDocument,
    records: Sequence[ActionRecord],
    exists: Callable[[str], bool | None],
) -> str:
    """Why ``action`` should not run now ("" when nothing stands against it): a subtask it
    depends on only failed, or the file it reads, edits, moves or deletes is missing.
    ``exists``: whether a workspace path exists (None: it cannot be told)."""
    subtask = plan.subtask(action.task_id)
    needed = dict.fromkeys([*(subtask.dependencies if subtask else ()), *action.dependencies])
    for dependency in needed:
        tried = [r for r in records if r.task_id == dependency and r.finished]
        if tried and not any(r.ok for r in tried):
            return f"it needs {dependency}, which failed"
    argument = NEEDS_EXISTING.get(action.tool)
    path = (action.arguments or {}).get(argument) if argument else None
    if isinstance(path, str) and exists(path) is False:
        return f"{path} does not exist"
    return ""
