"""The bot's own, forge-neutral types.

Webhook parsers turn GitHub and GitLab payloads into these; everything after the
parser (triggers, storage, worker, agent) sees only these. Forge-specific words
stay in ``bot/webhooks`` and ``bot/forges``: here an issue that carries code
changes is a *change request* (``IssueRef.is_change_request``), and a forge's
authentication scope (a GitHub App installation) is an opaque ``scope_id``.

The event types are frozen msgspec structs rather than dataclasses: every webhook
delivery builds five of them, and a struct is built (and turned into JSON-ready
data) about ten times faster. Copy one with a change by ``msgspec.structs.replace``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import msgspec


class TaskState(StrEnum):
    """Where a task stands (stored with the task; the worker's queue reads it)."""

    QUEUED = "queued"
    RUNNING = "running"
    AWAITING_INPUT = "awaiting_input"
    AWAITING_APPROVAL = "awaiting_approval"
    PAUSED = "paused"
    DONE = "done"
    NEEDS_HUMAN = "needs_human"
    FAILED = "failed"
    STOPPED = "stopped"


OPEN_STATES = frozenset({"open", "opened", "reopened"})  # an issue's state, as forges say it


class ForgeKind(StrEnum):
    GITHUB = "github"
    GITLAB = "gitlab"


class EventKind(StrEnum):
    """What happened, reduced to what the bot can react to."""

    PING = "ping"
    ISSUE_OPENED = "issue_opened"
    ISSUE_LABELED = "issue_labeled"
    ISSUE_CLOSED = "issue_closed"
    ISSUE_OTHER = "issue_other"
    COMMENT_CREATED = "comment_created"
    COMMENT_OTHER = "comment_other"
    REVIEW_SUBMITTED = "review_submitted"
    REVIEW_COMMENT = "review_comment"
    INSTALLATION = "installation"
    IGNORED = "ignored"
    # A check, status, workflow, pipeline or job of a commit started, changed or ended
    # (``ForgeEvent.checks`` says which commit and what was reported).
    CHECKS_CHANGED = "checks_changed"
    # New commits on a change request's head branch (``ForgeEvent.head`` has the new head).
    CHANGE_REQUEST_PUSHED = "change_request_pushed"
    # A person asked for a run on an issue without a comment or a label: a GitHub Actions
    # workflow_dispatch (``extra["instructions"]``: what they wrote, maybe nothing).
    RUN_REQUESTED = "run_requested"


class Actor(msgspec.Struct, frozen=True):
    """Who caused an event."""

    login: str
    id: str = ""
    is_bot: bool = False


class RepoRef(msgspec.Struct, frozen=True):
    """A repository (GitHub ``owner/name``; GitLab ``group/sub/project`` with its id)."""

    forge: ForgeKind
    full_name: str
    project_id: int | None = None
    scope_id: str | None = None
    default_branch: str | None = None
    web_url: str = ""

    @property
    def key(self) -> str:
        """A stable key for the repository across events."""
        return f"{self.forge.value}:{self.full_name}"


class IssueRef(msgspec.Struct, frozen=True):
    """An issue or change request (pull request / merge request) in a repository."""

    repo: RepoRef
    number: int
    is_change_request: bool = False
    title: str = ""
    body: str = ""
    web_url: str = ""
    author: str = ""
    state: str = "open"
    labels: tuple[str, ...] = ()
    head_branch: str | None = None
    # The repository the head branch lives in (``owner/name``): the same as ``repo``
    # unless the change request comes from a fork; None when the payload does not say.
    head_repo: str | None = None
    author_id: str = ""  # the author's account id, when the payload or the forge says

    @property
    def is_open(self) -> bool:
        """Open, in the forge's own word for it (GitHub ``open``, GitLab ``opened``)."""
        return self.state in OPEN_STATES

    @property
    def key(self) -> str:
        """One key per issue: at most one active task per key."""
        kind = "cr" if self.is_change_request else "issue"
        return f"{self.repo.key}#{kind}/{self.number}"


class CommentRef(msgspec.Struct, frozen=True):
    id: int
    body: str
    author: str = ""
    web_url: str = ""
    is_review_comment: bool = False


class CheckState(StrEnum):
    """Where one check of a commit stands, in the bot's words.

    PENDING: queued, requested, created, waiting for a runner or an earlier stage.
    RUNNING: in progress. WAITING: stopped until a person acts (GitHub ``action_required``,
    a blocking manual GitLab job, an approval). PASSED: success, neutral or skipped.
    FAILED: failure, error, timed out. CANCELLED: cancelled or stale (neither passed nor
    fixable)."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    PASSED = "passed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def settled(self) -> bool:
        """Nothing more will happen to it without a push or a person."""
        return self not in (CheckState.PENDING, CheckState.RUNNING)


class CheckKind(StrEnum):
    """What reported a check: one run or job, or an aggregate of several."""

    RUN = "run"  # GitHub check run (a GitHub Actions job is one)
    STATUS = "status"  # a commit status (GitHub), an external status (GitLab)
    SUITE = "suite"  # GitHub check suite: an aggregate of runs
    WORKFLOW = "workflow"  # GitHub Actions workflow run: an aggregate of jobs
    PIPELINE = "pipeline"  # GitLab pipeline: an aggregate of jobs
    JOB = "job"  # GitLab CI job


class Check(msgspec.Struct, frozen=True):
    """One check of a commit as a webhook or the forge's API reports it.

    ``conclusion`` is the forge's own word (``failure``, ``action_required``, ``manual``,
    ...) for the record; ``state`` is what the bot decides on. ``reporter`` is who
    reported it (a GitHub App as ``<slug>[bot]``, a status's creator, the user of a
    GitLab external status): the bot ignores its own. ``log_id`` names the CI job whose
    log explains it (a GitHub Actions job, a GitLab job), empty when there is none.
    ``optional``: its failure does not fail the commit (GitLab ``allow_failure``)."""

    name: str
    state: CheckState
    kind: CheckKind = CheckKind.RUN
    conclusion: str = ""
    id: str = ""
    reporter: str = ""
    web_url: str = ""
    summary: str = ""
    log_id: str = ""
    optional: bool = False

    @property
    def key(self) -> str:
        """Which check this is across reports: a later report of the same key replaces it."""
        return f"{self.kind.value}:{self.name}"


class ChecksReport(msgspec.Struct, frozen=True):
    """What one CI delivery says: checks of commit ``head_sha``, on ``branches``, for the
    change requests ``numbers`` (the numbers the payload names; empty when it names none,
    as for forks and GitLab job hooks)."""

    head_sha: str
    branches: tuple[str, ...] = ()
    numbers: tuple[int, ...] = ()
    checks: tuple[Check, ...] = ()


class HeadRef(msgspec.Struct, frozen=True):
    """A change request's head commit and base branch, as a change request event says."""

    sha: str
    base_branch: str = ""
    before_sha: str | None = None  # the head before a push, when the event says
    draft: bool = False


class ReviewRef(msgspec.Struct, frozen=True):
    """Where a review or review comment belongs.

    ``review_id``: GitHub's review (a submitted review and its line comments share it).
    ``thread_id``: the thread a comment is in (GitLab's discussion id; GitHub's webhooks
    do not name the thread: ``in_reply_to`` is the comment it answers). ``path``/``line``
    place a comment on the diff; ``commit_sha`` is the commit it was written against."""

    review_id: int | None = None
    state: str = ""
    thread_id: str | None = None
    in_reply_to: int | None = None
    path: str | None = None
    line: int | None = None
    commit_sha: str | None = None


class ForgeEvent(msgspec.Struct, frozen=True):
    """One webhook delivery, parsed."""

    forge: ForgeKind
    kind: EventKind
    name: str
    action: str
    delivery_id: str
    actor: Actor
    repo: RepoRef | None = None
    issue: IssueRef | None = None
    comment: CommentRef | None = None
    label_added: str | None = None
    labels_added: tuple[str, ...] = ()
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    checks: ChecksReport | None = None
    head: HeadRef | None = None
    review: ReviewRef | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ForgeEvent:
        return msgspec.convert(data, cls)


def _strings(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _issue_dict(issue: IssueRef) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(issue)
    return data


class CommandName(StrEnum):
    RUN = "run"
    PLAN = "plan"
    APPROVE = "approve"
    REJECT = "reject"
    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"
    RETRY = "retry"
    STATUS = "status"
    AUTOFIX = "autofix"  # on the bot's change request: switch its CI fix rounds on or off
    HELP = "help"
    UNKNOWN = "unknown"


class MessageKind(StrEnum):
    """What a message for a running task holds (``Store.add_message``)."""

    FEEDBACK = "feedback"  # {author, body}: a person's comment
    COMMAND = "command"  # {name, args, author}: an /agent command or an operator's


@dataclass(frozen=True, slots=True)
class Command:
    """One ``/agent <name> [args]`` line of a comment."""

    name: CommandName
    args: str = ""
    raw: str = ""


class TaskMode(StrEnum):
    RUN = "run"
    PLAN_ONLY = "plan"
    FOLLOW_UP = "follow_up"
    RETRY = "retry"


class RoundKind(StrEnum):
    """Why the bot works on its own change request again (a follow-up round)."""

    CI = "ci"  # the head commit's checks failed: reproduce, fix, push
    REVIEW = "review"  # a review (or a burst of notes): every open thread, one round
    BASE = "base"  # it conflicts with its base: merge the base in, resolve, gate, push


class FollowUpRound(msgspec.Struct, frozen=True):
    """What one follow-up round on the bot's change request answers.

    ``number``: the round's number among the change request's rounds of that kind (1-based).
    ``head_sha``: the head commit it answers (the failed commit, the commit reviewed, the
    conflicting one). ``base_branch``: the change request's base. ``checks``: the failed
    checks' names (CI). ``threads``: the review threads' ids, in checklist order, with
    their files (``paths``) and ``comment_ids`` the comments they held when the round
    began (REVIEW): a comment among them arriving late is no news to the round."""

    kind: RoundKind
    number: int = 1
    head_sha: str = ""
    base_branch: str = ""
    checks: tuple[str, ...] = ()
    threads: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()  # each thread's file ("" for one on the whole change)
    comment_ids: tuple[int, ...] = ()


class EvalRef(msgspec.Struct, frozen=True):
    """Which evaluation task a queued task is: the run folder (an absolute path every
    worker reaches) and the task's ``instance_id`` in it."""

    run: str
    instance_id: str


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """What a trigger asks the worker to do. ``round``: a follow-up round on the bot's own
    change request (CI, review, base), with ``instructions`` the context it was given
    (fenced already)."""

    issue: IssueRef
    requested_by: str
    mode: TaskMode = TaskMode.RUN
    instructions: str = ""
    trigger_comment_id: int | None = None
    previous_task_id: str | None = None
    round: FollowUpRound | None = None
    # The trace context the task was created in (a W3C traceparent carrier; bot.tracing):
    # its first run joins that trace. Empty while traces are off.
    trace_context: dict[str, str] = field(default_factory=dict, compare=False)
    # A task of ``bot eval run --queue``: its run folder and instance (docs/eval.md); the
    # worker's evaluation hook brings its forge and scores it when it ends.
    evaluation: EvalRef | None = None

    def with_trace(self, context: dict[str, str]) -> TaskRequest:
        """This request with the trace context it is created in (itself without one)."""
        return replace(self, trace_context=dict(context)) if context else self

    def to_dict(self) -> dict[str, Any]:
        data = {
            "issue": _issue_dict(self.issue),
            "requested_by": self.requested_by,
            "mode": self.mode.value,
            "instructions": self.instructions,
            "trigger_comment_id": self.trigger_comment_id,
            "previous_task_id": self.previous_task_id,
            "round": msgspec.to_builtins(self.round) if self.round is not None else None,
        }
        if self.trace_context:
            data["trace_context"] = dict(self.trace_context)
        if self.evaluation is not None:
            data["evaluation"] = msgspec.to_builtins(self.evaluation)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskRequest:
        found = data.get("round")
        evaluation = data.get("evaluation")
        return cls(
            issue=msgspec.convert(data["issue"], IssueRef),
            requested_by=data["requested_by"],
            mode=TaskMode(data.get("mode", TaskMode.RUN.value)),
            instructions=data.get("instructions", ""),
            trigger_comment_id=data.get("trigger_comment_id"),
            previous_task_id=data.get("previous_task_id"),
            round=msgspec.convert(found, FollowUpRound) if found else None,
            trace_context=_strings(data.get("trace_context")),
            evaluation=msgspec.convert(evaluation, EvalRef) if evaluation else None,
        )
