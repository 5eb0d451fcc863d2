"""The task's state machine (seed 004, 7.3) and its checkpoint form. Pure: no I/O.

``AgentState`` is everything a restarted worker needs to continue a task where it
stopped: the phase, the current plan, what each action did, counters for the
limits, token usage, the last message read, and what the task waits for.
``to_dict`` / ``from_dict`` are the checkpoint (de)serialisation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

CHECKPOINT_VERSION = 1


class Phase(StrEnum):
    INITIAL = "initial"
    GOAL_UNDERSTANDING = "goal_understanding"
    TASK_DECOMPOSITION = "task_decomposition"
    ACTION_PLANNING = "action_planning"
    EXECUTION = "execution"
    REFLECTION = "reflection"
    REVISION = "revision"
    COMPLETION = "completion"


_PLANNING = (Phase.GOAL_UNDERSTANDING, Phase.TASK_DECOMPOSITION, Phase.ACTION_PLANNING)

TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.INITIAL: frozenset({Phase.GOAL_UNDERSTANDING, Phase.COMPLETION}),
    # Re-planning (a rejected plan, an answered question) goes back to goal understanding.
    Phase.GOAL_UNDERSTANDING: frozenset(
        {Phase.GOAL_UNDERSTANDING, Phase.TASK_DECOMPOSITION, Phase.COMPLETION}
    ),
    Phase.TASK_DECOMPOSITION: frozenset(
        {Phase.ACTION_PLANNING, Phase.GOAL_UNDERSTANDING, Phase.COMPLETION}
    ),
    Phase.ACTION_PLANNING: frozenset(
        {Phase.EXECUTION, Phase.GOAL_UNDERSTANDING, Phase.REVISION, Phase.COMPLETION}
    ),
    Phase.EXECUTION: frozenset({Phase.EXECUTION, Phase.REFLECTION, Phase.COMPLETION}),
    Phase.REFLECTION: frozenset({Phase.REVISION, Phase.EXECUTION, Phase.COMPLETION}),
    Phase.REVISION: frozenset({Phase.EXECUTION, Phase.REVISION, Phase.COMPLETION}),
    Phase.COMPLETION: frozenset(),
}


def can_transition(current: Phase, target: Phase) -> bool:
    return target in TRANSITIONS[current]


def is_planning(phase: Phase) -> bool:
    return phase in _PLANNING


class ActionStatus(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass
class ActionRecord:
    """One executed action: its call and its result (never separated)."""

    key: str
    task_id: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    status: ActionStatus = ActionStatus.RUNNING
    output: str = ""
    summary: str = ""
    changed: bool = False
    writes: bool = False
    duration: float = 0.0
    revision: int = 0
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status is not ActionStatus.RUNNING

    @property
    def ok(self) -> bool:
        return self.status is ActionStatus.DONE

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "task_id": self.task_id,
            "tool": self.tool,
            "arguments": self.arguments,  # never changed after the call
            "status": self.status.value,
            "output": self.output,
            "summary": self.summary,
            "changed": self.changed,
            "writes": self.writes,
            "duration": self.duration,
            "revision": self.revision,
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ActionRecord:
        fields = dict(data)
        fields["status"] = ActionStatus(fields.get("status", ActionStatus.RUNNING.value))
        return cls(**fields)


@dataclass
class Waiting:
    """What a task waits for: ``clarification``, or ``approval`` of a plan or a tool call."""

    kind: str
    subject: str = ""
    since: float = 0.0
    wake_at: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class AgentState:
    phase: Phase = Phase.INITIAL
    plan: dict[str, Any] | None = None
    revisions: int = 0
    plan_number: int = 0
    records: dict[str, ActionRecord] = field(default_factory=dict)
    consecutive_failures: int = 0
    actions_since_reflection: int = 0
    message_seq: int = 0
    pending_feedback: list[dict[str, Any]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    waiting: Waiting | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0
    llm_pause_notified: bool = False
    failure_signatures: dict[str, int] = field(default_factory=dict)
    tried: list[str] = field(default_factory=list)
    planning_attempts: int = 0
    replan_reason: str = ""
    plan_approved: bool = False
    approved_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    cached_plan: bool = False
    complexity: str = ""
    task_text: str = ""
    early_done: bool = False
    # Keys of the batch whose results are not yet accounted for and reflected on: a worker
    # that died in between picks up the reflection instead of skipping it.
    unreflected: list[str] = field(default_factory=list)
    milestones: dict[str, int] = field(default_factory=dict)
    delivery: dict[str, Any] = field(default_factory=dict)
    outcome: dict[str, Any] | None = None

    # --- queries ---------------------------------------------------------------------------

    def finished_keys(self) -> set[str]:
        return {key for key, record in self.records.items() if record.finished}

    def done_tasks(self) -> set[str]:
        """Subtasks whose actions all ended, in earlier plans (for revised plans)."""
        return {r.task_id for r in self.records.values() if r.finished}

    def counts(self) -> tuple[int, int]:
        done = sum(1 for r in self.records.values() if r.status is ActionStatus.DONE)
        failed = sum(1 for r in self.records.values() if r.status is ActionStatus.FAILED)
        return done, failed

    def changed_anything(self) -> bool:
        return any(r.changed for r in self.records.values())

    # --- checkpoint form -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A snapshot for the checkpoint: containers the run changes in place are copied
        (the store serialises it in its own thread while the run goes on)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in data.items():
            if isinstance(value, dict):
                data[name] = dict(value)
            elif isinstance(value, list):
                data[name] = list(value)
        data["version"] = CHECKPOINT_VERSION
        data["phase"] = self.phase.value
        data["records"] = {key: r.to_dict() for key, r in self.records.items()}
        waiting = self.waiting
        data["waiting"] = (
            None
            if waiting is None
            else {
                "kind": waiting.kind,
                "subject": waiting.subject,
                "since": waiting.since,
                "wake_at": waiting.wake_at,
                "details": dict(waiting.details),
            }
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentState:
        version = data.get("version")
        if version != CHECKPOINT_VERSION:
            raise ValueError(f"checkpoint version {version!r} is not {CHECKPOINT_VERSION}")
        fields = {k: v for k, v in data.items() if k != "version"}
        fields["phase"] = Phase(fields.get("phase", Phase.INITIAL.value))
        fields["records"] = {
            key: ActionRecord.from_dict(value) for key, value in fields.get("records", {}).items()
        }
        waiting = fields.get("waiting")
        fields["waiting"] = Waiting(**waiting) if isinstance(waiting, dict) else None
        known = set(cls.__dataclass_fields__)
        unknown = set(fields) - known
        if unknown:
            raise ValueError(f"checkpoint has unknown fields: {sorted(unknown)}")
        return cls(**fields)


def consumed_message_seq(checkpoint: dict[str, Any] | None) -> int | None:
    """The sequence number of the last message the coordinator read, from a stored
    checkpoint (None: no checkpoint, so nothing is known to be read)."""
    if not checkpoint:
        return None
    try:
        return int(checkpoint.get("message_seq", 0))
    except (TypeError, ValueError):
        return None
