"""The task's stages and its checkpoint form. Pure: no I/O.

``AgentState`` is everything a restarted worker needs to continue a task where it
stopped: the stage (the loop's one source of truth), the current plan, what each
action did, counters for the limits, token usage, the last message read, and what
the task waits for. ``to_dict`` / ``from_dict`` are the checkpoint (de)serialisation;
``upgrade_v1`` reads the checkpoints of version 1 (a phase and flags).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from bot.record.plan import Complexity
from bot.record.plan_rules import plan_digest
from bot.run_events import PauseReason, WaitKind

CHECKPOINT_VERSION = 2


class Phase(StrEnum):
    """The planning phases people see in the status comment (PHASE events)."""

    INITIAL = "initial"
    GOAL_UNDERSTANDING = "goal_understanding"
    TASK_DECOMPOSITION = "task_decomposition"
    ACTION_PLANNING = "action_planning"
    EXECUTION = "execution"
    REFLECTION = "reflection"
    REVISION = "revision"
    COMPLETION = "completion"


class Stage(StrEnum):
    """Where the task is: the loop runs the handler of the current stage."""

    PLAN = "plan"  # make the plan (or, with one, pass the plan-only gate)
    WAIT = "wait"  # waiting for people: answers, or an approval (``AgentState.waiting``)
    EXECUTE = "execute"  # run the next batch of actions
    REFLECT = "reflect"  # look at the batch that ran (``AgentState.batch``)
    REVISE = "revise"  # a revision in progress (interrupted: the current plan goes on)
    DELIVER = "deliver"  # quality gate, push, change request, completion summary
    DONE = "done"  # the outcome is stored (``AgentState.outcome``)


_NEXT: dict[Stage, frozenset[Stage]] = {
    Stage.PLAN: frozenset({Stage.PLAN, Stage.WAIT, Stage.EXECUTE, Stage.DONE}),
    Stage.WAIT: frozenset(
        {Stage.PLAN, Stage.WAIT, Stage.EXECUTE, Stage.REVISE, Stage.DELIVER, Stage.DONE}
    ),
    # people's feedback is reflected on where it is read, and may revise the plan
    Stage.EXECUTE: frozenset(
        {Stage.EXECUTE, Stage.REFLECT, Stage.REVISE, Stage.WAIT, Stage.DELIVER, Stage.DONE}
    ),
    # a result nobody could judge goes to its author (``planning.reflection.unjudged: ask``)
    Stage.REFLECT: frozenset({Stage.EXECUTE, Stage.REVISE, Stage.WAIT, Stage.DELIVER, Stage.DONE}),
    Stage.REVISE: frozenset({Stage.EXECUTE, Stage.WAIT, Stage.DONE}),
    Stage.DELIVER: frozenset({Stage.REVISE, Stage.WAIT, Stage.DONE}),
    Stage.DONE: frozenset(),
}
# Every stage but the last may end the task (a person is needed, the budget is spent).
NEXT_STAGES = {
    stage: nexts | {Stage.DONE} if stage is not Stage.DONE else nexts
    for stage, nexts in _NEXT.items()
}


def can_move(current: Stage, target: Stage) -> bool:
    return target in NEXT_STAGES[current]


@dataclass(frozen=True, slots=True)
class Feedback:
    """A person's comment on the running task (kept until a reflection reads it)."""

    author: str
    body: str
    seq: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"author": self.author, "body": self.body, "seq": self.seq}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Feedback:
        return cls(str(data.get("author", "")), str(data.get("body", "")), int(data.get("seq", 0)))


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call waiting for approval, exactly as it was shown."""

    key: str
    task_id: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class Waiting:
    kind: WaitKind
    since: float = 0.0
    wake_at: float | None = None
    what: str = ""  # what is to be approved, in words
    text: str = ""  # what the request showed
    after_seq: int = 0  # approvals up to this message answer something else
    timed_out: bool = False
    number: int = 0  # of the revision
    questions: list[str] = field(default_factory=list)
    call: ToolCall | None = None
    plan_hash: str = ""  # the digest of the plan the request showed (plan and revision)
    paths: dict[str, str] = field(default_factory=dict)  # push: path -> content shown

    @property
    def approval(self) -> bool:
        return self.kind is not WaitKind.ANSWERS

    @property
    def approvable(self) -> bool:
        """An approval answers it: an approval request, or questions shown with a
        best-guess plan (``plan_hash``) that ``/agent approve`` runs."""
        return self.approval or bool(self.plan_hash)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["kind"] = self.kind.value
        data["questions"] = list(self.questions)
        data["paths"] = dict(self.paths)
        call = self.call
        data["call"] = (
            None if call is None else {f.name: getattr(call, f.name) for f in fields(call)}
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Waiting:
        values = dict(data)
        values["kind"] = WaitKind(values["kind"])
        call = values.get("call")
        values["call"] = ToolCall(**call) if isinstance(call, dict) else None
        return cls(**values)


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
            return _WAITING_PHASE[waiting.kind]
        if self.stage is Stage.PLAN:
            return Phase.ACTION_PLANNING if self.plan is not None else Phase.INITIAL
        return _STAGE_PHASE[self.stage]

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


_STAGE_PHASE = {
    Stage.PLAN: Phase.INITIAL,
    Stage.WAIT: Phase.EXECUTION,
    Stage.EXECUTE: Phase.EXECUTION,
    Stage.REFLECT: Phase.EXECUTION,
    Stage.REVISE: Phase.REVISION,
    Stage.DELIVER: Phase.EXECUTION,
    Stage.DONE: Phase.COMPLETION,
}
_WAITING_PHASE = {
    WaitKind.ANSWERS: Phase.GOAL_UNDERSTANDING,
    WaitKind.PLAN: Phase.ACTION_PLANNING,
    WaitKind.REVISION: Phase.REVISION,
    WaitKind.TOOL: Phase.EXECUTION,
    WaitKind.PUSH: Phase.EXECUTION,
    WaitKind.JUDGEMENT: Phase.REFLECTION,
}
_V1_FLAGS = ("phase", "early_done", "plan_approved", "unreflected", "llm_pause_notified")


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version 1 checkpoint (a phase and flags) in the version 2 form (a stage). Pure."""
    out = {k: v for k, v in data.items() if k not in _V1_FLAGS}
    out["version"] = CHECKPOINT_VERSION
    out["batch"] = list(data.get("unreflected") or [])
    notified = data.get("llm_pause_notified")
    out["paused"] = PauseReason.LLM_UNAVAILABLE.value if notified else None
    waiting = data.get("waiting")
    out["waiting"] = _waiting_v1(waiting) if isinstance(waiting, dict) else None
    out["stage"] = _stage_v1(data, out["waiting"]).value
    return out


def _stage_v1(data: dict[str, Any], waiting: dict[str, Any] | None) -> Stage:
    if data.get("outcome") is not None:
        return Stage.DONE
    if waiting is not None:
        return Stage.WAIT
    if data.get("plan") is None:
        return Stage.PLAN
    if data.get("early_done"):
        return Stage.DELIVER
    if not data.get("plan_approved") and not data.get("records"):
        return Stage.PLAN  # planned; the plan-only gate is still ahead
    return Stage.EXECUTE


def _waiting_v1(old: dict[str, Any]) -> dict[str, Any]:
    details = dict(old.get("details") or {})
    answers = old.get("kind") == WaitKind.ANSWERS  # v1: kind "clarification" or "approval"
    kind = WaitKind.ANSWERS if answers else WaitKind(old["subject"])
    call = None
    if kind is WaitKind.TOOL:
        call = {
            "key": str(details["key"]),
            "task_id": str(details["task_id"]),
            "tool": str(details["tool"]),
            "arguments": dict(details["arguments"]),
        }
    return {
        "kind": kind.value,
        "since": old.get("since", 0.0),
        "wake_at": old.get("wake_at"),
        "what": str(details.get("what", "")),
        "text": str(details.get("text", "")),
        "after_seq": int(details.get("after_seq", 0)),
        "timed_out": bool(details.get("timed_out", False)),
        "number": int(details.get("number", 0)),
        "questions": [str(q) for q in details.get("questions") or []],
        "call": call,
    }


def consumed_message_seq(checkpoint: dict[str, Any] | None) -> int | None:
    """The sequence number of the last message the coordinator read, from a stored
    checkpoint (None: no checkpoint, so nothing is known to be read)."""
    if not checkpoint:
        return None
    try:
        return int(checkpoint.get("message_seq", 0))
    except (TypeError, ValueError):
        return None
