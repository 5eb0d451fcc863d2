"""The bot's own, forge-neutral types.

Webhook parsers turn GitHub and GitLab payloads into these; everything after the
parser (triggers, storage, worker, agent) sees only these. Forge-specific words
stay in ``bot/webhooks`` and ``bot/forges``: here an issue that carries code
changes is a *change request* (``IssueRef.is_change_request``), and a forge's
authentication scope (a GitHub App installation) is an opaque ``scope_id``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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


@dataclass(frozen=True, slots=True)
class Actor:
    """Who caused an event."""

    login: str
    id: str = ""
    is_bot: bool = False


@dataclass(frozen=True, slots=True)
class RepoRef:
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


@dataclass(frozen=True, slots=True)
class IssueRef:
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

    @property
    def key(self) -> str:
        """One key per issue: at most one active task per key."""
        kind = "cr" if self.is_change_request else "issue"
        return f"{self.repo.key}#{kind}/{self.number}"


@dataclass(frozen=True, slots=True)
class CommentRef:
    id: int
    body: str
    author: str = ""
    web_url: str = ""
    is_review_comment: bool = False


@dataclass(frozen=True, slots=True)
class ForgeEvent:
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
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (hand-written: ``dataclasses.asdict`` is slow on the hot path)."""
        comment = self.comment
        return {
            "forge": self.forge.value,
            "kind": self.kind.value,
            "name": self.name,
            "action": self.action,
            "delivery_id": self.delivery_id,
            "actor": {"login": self.actor.login, "id": self.actor.id, "is_bot": self.actor.is_bot},
            "repo": _repo_dict(self.repo),
            "issue": _issue_dict(self.issue),
            "comment": None
            if comment is None
            else {
                "id": comment.id,
                "body": comment.body,
                "author": comment.author,
                "web_url": comment.web_url,
                "is_review_comment": comment.is_review_comment,
            },
            "label_added": self.label_added,
            "labels_added": list(self.labels_added),
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ForgeEvent:
        repo = _repo_from(data.get("repo"))
        issue_data = data.get("issue")
        issue = None
        if issue_data is not None:
            issue_fields = dict(issue_data)
            issue_fields["repo"] = _repo_from(issue_fields["repo"])
            issue_fields["labels"] = tuple(issue_fields.get("labels", ()))
            issue = IssueRef(**issue_fields)
        comment = CommentRef(**data["comment"]) if data.get("comment") else None
        return cls(
            forge=ForgeKind(data["forge"]),
            kind=EventKind(data["kind"]),
            name=data["name"],
            action=data["action"],
            delivery_id=data["delivery_id"],
            actor=Actor(**data["actor"]),
            repo=repo,
            issue=issue,
            comment=comment,
            label_added=data.get("label_added"),
            labels_added=tuple(data.get("labels_added", ())),
            extra=dict(data.get("extra", {})),
        )


def _repo_dict(repo: RepoRef | None) -> dict[str, Any] | None:
    if repo is None:
        return None
    return {
        "forge": repo.forge.value,
        "full_name": repo.full_name,
        "project_id": repo.project_id,
        "scope_id": repo.scope_id,
        "default_branch": repo.default_branch,
        "web_url": repo.web_url,
    }


def _issue_dict(issue: IssueRef | None) -> dict[str, Any] | None:
    if issue is None:
        return None
    return {
        "repo": _repo_dict(issue.repo),
        "number": issue.number,
        "is_change_request": issue.is_change_request,
        "title": issue.title,
        "body": issue.body,
        "web_url": issue.web_url,
        "author": issue.author,
        "state": issue.state,
        "labels": list(issue.labels),
        "head_branch": issue.head_branch,
        "head_repo": issue.head_repo,
    }


def _repo_from(data: dict[str, Any] | None) -> RepoRef | None:
    if data is None:
        return None
    fields = dict(data)
    fields["forge"] = ForgeKind(fields["forge"])
    return RepoRef(**fields)


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
    HELP = "help"
    UNKNOWN = "unknown"


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


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """What a trigger asks the worker to do."""

    issue: IssueRef
    requested_by: str
    mode: TaskMode = TaskMode.RUN
    instructions: str = ""
    trigger_comment_id: int | None = None
    previous_task_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "issue": _issue_dict(self.issue),
            "requested_by": self.requested_by,
            "mode": self.mode.value,
            "instructions": self.instructions,
            "trigger_comment_id": self.trigger_comment_id,
            "previous_task_id": self.previous_task_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskRequest:
        issue_fields = dict(data["issue"])
        repo = _repo_from(issue_fields["repo"])
        assert repo is not None
        issue_fields["repo"] = repo
        issue_fields["labels"] = tuple(issue_fields.get("labels", ()))
        return cls(
            issue=IssueRef(**issue_fields),
            requested_by=data["requested_by"],
            mode=TaskMode(data.get("mode", TaskMode.RUN.value)),
            instructions=data.get("instructions", ""),
            trigger_comment_id=data.get("trigger_comment_id"),
            previous_task_id=data.get("previous_task_id"),
        )
