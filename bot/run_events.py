"""The run's vocabulary: how a run ends, and what it tells people on the way. Pure.

A run of the agent ends in an ``Outcome`` (the task's next ``TaskState``, with a
``PauseReason`` when it pauses) and reports what people should see as progress
events, one frozen dataclass per ``ProgressKind``. The worker stores the outcome,
the comments render the events (the status comment folds them; milestones get their
own comment). A low module: it imports nothing of the bot's rooms, so the worker's
pure decisions, the comments and the agent all stand on it.

An event's ``data`` is its fields as plain data (the form a stored closing event keeps
in the checkpoint); ``progress_event(kind, data)`` reads that form back, ignoring keys
the kind does not have, so a checkpoint written by an earlier version still announces.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar

from bot.events import TaskState


class PauseReason(StrEnum):
    """Why a task is paused (the value is the PAUSED event's ``reason``)."""

    LLM_UNAVAILABLE = "llm_unavailable"  # the model endpoint is down: woken by a health probe
    APPROVAL_TIMEOUT = "approval_timeout"  # nobody answered an approval request in time
    PERSON = "user"  # someone sent /agent pause
    STORE = "store_failing"  # the store failed every retry: the emergency stop is set


class WaitKind(StrEnum):
    """What a waiting task waits for (the value is the APPROVAL_REQUEST ``subject``)."""

    ANSWERS = "clarification"  # answers to the questions about an unclear goal
    PLAN = "plan"  # approval of the plan (/agent plan)
    REVISION = "revision"  # approval of a revised plan (require_human_approval)
    TOOL = "tool"  # approval of one tool call the policy wants approved
    PUSH = "push"  # approval of CI definitions in the push (planning.security)
    JUDGEMENT = "judgement"  # a person's judgement of a result nobody else could judge


class ErrorCategory(StrEnum):
    """What went wrong, as ``errors.log`` names it (specification 003, 6)."""

    MODEL = "model"  # a model call failed, the model was unreachable, an answer was invalid
    TOOL = "tool"  # an action or a set-up command failed
    QUALITY_GATE = "quality_gate"  # the lint or the tests failed
    FORGE = "forge"  # a push, a change request or another forge write failed
    PERSISTENCE = "persistence"  # the store or the run directory could not keep something


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a run ended. ``state`` is the task's next state; ``wake_at`` (epoch seconds)
    is when a waiting or paused task should be looked at again (None: only when a
    person acts); ``pause`` why a paused task is paused."""

    state: TaskState
    summary: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    wake_at: float | None = None
    pause: PauseReason | None = None


class SubtaskStatus(StrEnum):
    """A subtask on the plan's checklist (``PlanMade.statuses``, ``Revised.statuses``)."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


class ProgressKind(StrEnum):
    """Moments of a task, from least to most worth a person's attention."""

    PHASE = "phase"  # phase changed (status comment only)
    PLAN = "plan"  # the plan (status comment checklist)
    ACTION = "action"  # an action started / finished (status comment only)
    USAGE = "usage"  # tokens used so far (status comment only)
    LINKS = "links"  # branch / change request / report links (status comment only)
    COURSE = "course"  # the bot changed course after an unexpected result (status comment)
    REVISION = "revision"  # a plan revision: its own comment
    REFLECTION = "reflection"  # a failure reflection: its own comment
    CLARIFICATION = "clarification"  # questions for the author: its own comment, waits
    APPROVAL_REQUEST = "approval_request"  # plan / tool call to approve: its own comment, waits
    PAUSED = "paused"  # paused (LLM down, approval timeout, /agent pause): its own comment
    COMPLETION = "completion"  # the completion summary: its own comment
    HUMAN_INTERVENTION = "human_intervention"  # docs/planning.md#run-endings: its own comment
    NOTICE = "notice"  # a short reply (e.g. to a command): its own comment
    SETTINGS_REFUSED = "settings_refused"  # .agent.yaml / personal planning values refused


EVENT_TYPES: dict[ProgressKind, type[ProgressEvent]] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressEvent:
    """One moment of a run; ``seq`` numbers a milestone (a re-run replaces, not repeats)."""

    kind: ClassVar[ProgressKind]
    seq: int | None = None

    def __init_subclass__(cls) -> None:
        # Each kind's class, by kind (``progress_event``); a slotted dataclass is made
        # anew after its body, and that last class of the kind is the one kept.
        EVENT_TYPES[cls.kind] = cls

    @property
    def data(self) -> dict[str, Any]:
        """The fields as plain data (a field that is None is left out: no ``seq`` on an
        event that is not a milestone, no ``gate`` where the gate did not run)."""
        values = ((f.name, getattr(self, f.name)) for f in fields(self))
        return {name: value for name, value in values if value is not None}


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseChanged(ProgressEvent):
    kind: ClassVar[ProgressKind] = ProgressKind.PHASE
    phase: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanMade(ProgressEvent):
    kind: ClassVar[ProgressKind] = ProgressKind.PLAN
    plan: dict[str, Any]
    statuses: dict[str, str] = field(default_factory=dict)
    cached: bool = False
    complexity: str = ""
    best_guess: bool = False  # the plan an unclear goal's questions show


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionProgress(ProgressEvent):
    kind: ClassVar[ProgressKind] = ProgressKind.ACTION
    task_id: str
    status: str  # running, done, failed
    key: str = ""
    tool: str = ""
    purpose: str = ""
    changed: bool = False
    result: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageReport(ProgressEvent):
    kind: ClassVar[ProgressKind] = ProgressKind.USAGE
    total_tokens: int = 0
    phase: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    calls: int = 0
    by_phase: dict[str, dict[str, int]] = field(default_factory=dict)
    budget: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LinksShown(ProgressEvent):
    """The task's branch, change request and quality gate (``gate``: result and steps)."""

    kind: ClassVar[ProgressKind] = ProgressKind.LINKS
    branch: str = ""
    change_request_url: str = ""
    gate: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CourseChanged(ProgressEvent):
    """The bot changed course because a result was not what an action meant to do, or an
    action's preconditions no longer held (docs/planning.md#unexpected-results)."""

    kind: ClassVar[ProgressKind] = ProgressKind.COURSE
    reason: str
    key: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Revised(ProgressEvent):
    kind: ClassVar[ProgressKind] = ProgressKind.REVISION
    number: int  # revisions that count against the limit, this one included
    limit: int
    reason: str = ""
    changes: list[Any] = field(default_factory=list)
    requested_by_people: bool = False
    plan: dict[str, Any] | None = None
    statuses: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reflected(ProgressEvent):
    kind: ClassVar[ProgressKind] = ProgressKind.REFLECTION
    action: str
    status: str  # success, partial, failure
    evaluation: str = ""
    issues: list[str] = field(default_factory=list)
    plan_revision_needed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ClarificationAsked(ProgressEvent):
    kind: ClassVar[ProgressKind] = ProgressKind.CLARIFICATION
    questions: list[str]
    message: str = ""
    waiting: str = "clarification"
    best_guess: str = ""  # the best-guess plan shown with the questions, in words


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalAsked(ProgressEvent):
    """``subject``: plan, revision, tool, push (``WaitKind``); ``what`` in words."""

    kind: ClassVar[ProgressKind] = ProgressKind.APPROVAL_REQUEST
    what: str
    subject: WaitKind | None = None
    details: str = ""
    timeout: float = 0.0
    waiting: str = ""
    tool: str = ""
    number: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Paused(ProgressEvent):
    """``reason``: a ``PauseReason`` value, or a person's own words."""

    kind: ClassVar[ProgressKind] = ProgressKind.PAUSED
    reason: str = PauseReason.PERSON.value
    by: str = ""
    endpoint: str = "LLM"
    error: str = ""
    subject: str = ""
    setup_steps: list[str] = field(default_factory=list)  # what brings the model back


@dataclass(frozen=True, slots=True, kw_only=True)
class Completed(ProgressEvent):
    kind: ClassVar[ProgressKind] = ProgressKind.COMPLETION
    summary: dict[str, Any]
    report: str = ""
    branch: str = ""
    change_request_url: str = ""
    gate: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InterventionNeeded(ProgressEvent):
    """``setup``: the failing set-up command (command, exit_code, timed_out, tail)."""

    kind: ClassVar[ProgressKind] = ProgressKind.HUMAN_INTERVENTION
    summary: dict[str, Any]
    reason: str = ""
    tried: list[str] = field(default_factory=list)
    partial_plan: dict[str, Any] | None = None
    setup: dict[str, Any] | None = None
    report: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice(ProgressEvent):
    kind: ClassVar[ProgressKind] = ProgressKind.NOTICE
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingsRefused(ProgressEvent):
    """``refused``: each refused key (``bot.config.overrides.Refusal`` as data, + user)."""

    kind: ClassVar[ProgressKind] = ProgressKind.SETTINGS_REFUSED
    refused: list[dict[str, Any]] = field(default_factory=list)


def progress_event(kind: ProgressKind | str, data: Mapping[str, Any]) -> ProgressEvent:
    """The event of ``kind`` from its plain-data form (keys it does not have are left out)."""
    cls = EVENT_TYPES[ProgressKind(kind)]
    known = {f.name for f in fields(cls)}
    values = {k: v for k, v in data.items() if k in known}
    if cls is ApprovalAsked and values.get("subject"):
        values["subject"] = WaitKind(values["subject"])
    return cls(**values)


Emit = Callable[[ProgressEvent], Awaitable[None]]
