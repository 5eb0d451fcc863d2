"""The task's state and its checkpoint form. Pure: no I/O.

``AgentState`` is everything a restarted worker needs to continue a task where it
stopped: the stage (the loop's one source of truth), the current plan, what each
action did, counters for the limits, token usage, the last message read, and what
the task waits for. ``to_dict`` / ``from_dict`` are the checkpoint (de)serialisation;
``upgrade_v1`` (``checkpoint_v1.py``) reads the checkpoints of version 1 (a phase and
flags). The stages and their moves are in ``stages.py``, what a task waits for in
``waiting.py``; both are importable from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from bot.record.checkpoint_v1 import CHECKPOINT_VERSION, upgrade_v1
from bot.record.plan import Complexity
from bot.record.plan_rules import plan_digest
from bot.record.stages import (
    NEXT_STAGES,
    STAGE_PHASE,
    WAITING_PHASE,
    Phase,
    Stage,
    can_move,
)
from bot.record.waiting import Feedback, ToolCall, Waiting
from bot.run_events import PauseReason, WaitKind

__all__ = [
    "CHECKPOINT_VERSION",
    "NEXT_STAGES",
    "ActionRecord",
    "ActionStatus",
    "AgentState",
    "Feedback",
    "Phase",
    "Stage",
    "ToolCall",
    "WaitKind",
    "Waiting",
    "can_move",
    "consumed_message_seq",
    "upgrade_v1",
]


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
    # What a workspace write did to the paths (docs/planning.md#unexpected-results): the
    # paths it meant to change that are unchanged, and paths it changed without meaning to.
    unchanged_paths: list[str] = field(default_factory=list)
    unexpected_paths: list[str] = field(default_factory=list)

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
            "unchanged_paths": list(self.unchanged_paths),
            "unexpected_paths": list(self.unexpected_paths),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ActionRecord:
        fields = dict(data)
        fields["status"] = ActionStatus(fields.get("status", ActionStatus.RUNNING.value))
        return cls(**fields)


@dataclass
class AgentState:
    stage: Stage = Stage.PLAN
    plan: dict[str, Any] | None = None
    revisions: int = 0
    plan_number: int = 0
    records: dict[str, ActionRecord] = field(default_factory=dict)
    # Keys of the batch that runs or ran and is not yet reflected on: a worker that died
    # in between picks up the reflection instead of skipping it.
    batch: list[str] = field(default_factory=list)
    consecutive_failures: int = 0
    actions_since_reflection: int = 0
    message_seq: int = 0
    pending_feedback: list[Feedback] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    waiting: Waiting | None = None
    # A pause people were told about and that is not over yet (an announced LLM outage
    # is not announced again on every retry).
    paused: PauseReason | None = None
    # Runs in a row that ended paused by an outage (0 once the model answers): each doubles
    # the wait before the next try, so a model that fails right after a resume is not
    # retried (and the issue not touched) every health interval.
    outage_pauses: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0
    failure_signatures: dict[str, int] = field(default_factory=dict)
    tried: list[str] = field(default_factory=list)
    planning_attempts: int = 0
    replan_reason: str = ""
    # Why a finer decomposition failed, once it has: the next planning call (in this run
    # or, after a restart, the next) asks at the coarsest level with it (docs/planning.md).
    coarser: str = ""
    approved_calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    approved_plan: str = ""  # the digest of the plan a person approved (plan_rules.py)
    # Guarded paths (CI definitions) -> the content a person approved (content_digest).
    approved_paths: dict[str, str] = field(default_factory=dict)
    cached_plan: bool = False
    complexity: Complexity | None = None
    task_text: str = ""
    milestones: dict[str, int] = field(default_factory=dict)
    delivery: dict[str, Any] = field(default_factory=dict)
    setup: dict[str, Any] = field(default_factory=dict)  # bot/sandbox/setup.py SetupResult
    # Where the bot changed course after an unexpected result, in words (the status comment).
    course: list[str] = field(default_factory=list)
    # planning.enabled: false: one open tool loop instead of a plan (docs/planning.md), and
    # what its next step is told (people's feedback, what the record holds against a claim).
    open_loop: bool = False
    open_notes: list[str] = field(default_factory=list)
    memo: list[str] = field(default_factory=list)  # the memo tool's notes (tools/memo.py)
    history_summary: str = ""  # older calls folded into one summary (record/folding.py)
    folded: list[str] = field(default_factory=list)  # the keys of the calls folded
    outcome: dict[str, Any] | None = None
    # The traceparent of each traced run, oldest first (bot.tracing): a resumed run links
    # to the one before it; the API and the report show the last one's trace id.
    traces: list[str] = field(default_factory=list)

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

    def phase(self) -> Phase:
        """The phase the status comment shows for this stage."""
        waiting = self.waiting
        if self.stage is Stage.WAIT and waiting is not None:
            return WAITING_PHASE[waiting.kind]
        if self.stage is Stage.PLAN:
            return Phase.ACTION_PLANNING if self.plan is not None else Phase.INITIAL
        return STAGE_PHASE[self.stage]

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
        data["stage"] = self.stage.value
        data["paused"] = self.paused.value if self.paused is not None else None
        data["records"] = {key: r.to_dict() for key, r in self.records.items()}
        data["pending_feedback"] = [f.to_dict() for f in self.pending_feedback]
        data["complexity"] = self.complexity.value if self.complexity is not None else ""
        data["waiting"] = self.waiting.to_dict() if self.waiting is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentState:
        version = data.get("version")
        if version == 1:
            data = upgrade_v1(data)
        elif version != CHECKPOINT_VERSION:
            raise ValueError(f"checkpoint version {version!r} is not {CHECKPOINT_VERSION}")
        fields = {k: v for k, v in data.items() if k != "version"}
        fields["stage"] = Stage(fields.get("stage", Stage.PLAN.value))
        paused = fields.get("paused")
        fields["paused"] = PauseReason(paused) if paused is not None else None
        fields["records"] = {
            key: ActionRecord.from_dict(value) for key, value in fields.get("records", {}).items()
        }
        waiting = fields.get("waiting")
        fields["waiting"] = Waiting.from_dict(waiting) if isinstance(waiting, dict) else None
        feedback = fields.get("pending_feedback") or []
        fields["pending_feedback"] = [Feedback.from_dict(f) for f in feedback]
        complexity = fields.get("complexity") or ""
        fields["complexity"] = Complexity(complexity) if complexity else None
        if "approved_plan" not in fields:
            fields["approved_plan"] = _approved_before(fields["stage"], fields.get("plan"))
        known = set(cls.__dataclass_fields__)
        unknown = set(fields) - known
        if unknown:
            raise ValueError(f"checkpoint has unknown fields: {sorted(unknown)}")
        return cls(**fields)


def _approved_before(stage: Stage, plan: dict[str, Any] | None) -> str:
    """A checkpoint from before plans were bound to their approval: a plan that was
    already past the approval gate (running, reflecting, delivering) stays approved."""
    if plan is None or stage in (Stage.PLAN, Stage.WAIT):
        return ""
    return plan_digest(plan)


def consumed_message_seq(checkpoint: dict[str, Any] | None) -> int | None:
    """The sequence number of the last message the coordinator read, from a stored
    checkpoint (None: no checkpoint, so nothing is known to be read)."""
    if not checkpoint:
        return None
    try:
        return int(checkpoint.get("message_seq", 0))
    except (TypeError, ValueError):
        return None
