"""GitHub webhooks: verify the signature and parse the payload. Pure: no I/O.

``verify_signature`` checks ``X-Hub-Signature-256`` against the raw body;
``parse_event`` turns ``X-GitHub-Event`` plus the raw JSON body into the bot's
forge-neutral ``ForgeEvent``; ``delivery_key`` names a delivery for de-duplication.
A payload without the shape its event promises raises ``PayloadError`` naming the key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Any

from msgspec.structs import replace

from bot.events import (
    Actor,
    CommentRef,
    EventKind,
    ForgeEvent,
    ForgeKind,
    HeadRef,
    IssueRef,
    RepoRef,
    ReviewRef,
)
from bot.webhooks import github_ci
from bot.webhooks import github_payloads as p
from bot.webhooks.decode import convert, decode, decoder
from bot.webhooks.errors import PayloadError
from bot.webhooks.github_common import actor as _actor
from bot.webhooks.github_common import event as _event
from bot.webhooks.github_common import repo as _repo

SIGNATURE_PREFIX = "sha256="

_ISSUE_KINDS = {
    "opened": EventKind.ISSUE_OPENED,
    "labeled": EventKind.ISSUE_LABELED,
    "closed": EventKind.ISSUE_CLOSED,
}


def verify_signature(body: bytes, signature_header: str | None, *, secret: str) -> bool:
    """True when ``signature_header`` is ``sha256=<HMAC-SHA256 of body with secret>``."""
    if not secret:
        raise ValueError("the GitHub webhook secret is empty; refusing to verify with it")
    if not signature_header or not signature_header.startswith(SIGNATURE_PREFIX):
        return False
    try:
        given = bytes.fromhex(signature_header[len(SIGNATURE_PREFIX) :].strip())
    except ValueError:
        return False  # not hex: cannot be the digest
    expected = hmac.digest(secret.encode("utf-8"), body, "sha256")
    return hmac.compare_digest(expected, given)


def delivery_key(delivery_id: str | None, app_id: str | None, body: bytes) -> str:
    """``github:<app>:<delivery>``; without a delivery id, ``github:sha256:<body hash>``."""
    delivery = (delivery_id or "").strip()
    if delivery:
        return f"github:{app_id or '-'}:{delivery}"
    return f"github:sha256:{hashlib.sha256(body).hexdigest()}"


def parse_event(event_name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    """The ``ForgeEvent`` for one delivery's raw body; events the bot does not handle are
    IGNORED. The body is decoded straight into the event's payload struct."""
    try:
        handler = _HANDLERS.get(event_name)
        if handler is None:
            return _ignored(event_name, delivery_id, decode(_LOOSE, body))
        return handler(event_name, delivery_id, body)
    except PayloadError as exc:
        raise PayloadError(f"GitHub {event_name!r} event: {exc}") from None


def _issue(data: p.Issue, repo: RepoRef, *, change_request: bool) -> IssueRef:
    state = data.state or "open"
    if change_request and data.merged:
        state = "merged"
    head = data.head
    head_repo = head.repo if head is not None else None  # null: fork deleted
    return IssueRef(
        repo=repo,
        number=data.number,
        is_change_request=change_request,
        title=data.title,
        body=data.body or "",
        web_url=data.html_url or "",
        author=data.user.login,
        author_id="" if data.user.id is None else str(data.user.id),
        state=state,
        labels=tuple(label.name for label in data.labels or ()),
        head_branch=head.ref if head is not None else None,
        head_repo=head_repo.full_name if head_repo is not None else None,
    )


def _comment(data: p.Comment, *, review: bool) -> CommentRef:
    return CommentRef(
        id=data.id,
        body=data.body or "",
        author=data.user.login,
        web_url=data.html_url or "",
        is_review_comment=review,
    )


def _label_fields(action: str | None, label: p.Named | None) -> dict[str, Any]:
    if action not in ("labeled", "unlabeled"):
        return {}
    if label is None:
        raise PayloadError("payload.label: missing")
    if action == "labeled":
        return {"label_added": label.name, "labels_added": (label.name,)}
    return {"extra": {"label_removed": label.name}}


def _issues(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_ISSUES, body)
    change_request = root.issue.pull_request is not None
    return _issue_event(name, delivery_id, root, root.issue, change_request=change_request)


def _pull_request(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_PULL_REQUEST, body)
    event = _issue_event(name, delivery_id, root, root.pull_request, change_request=True)
    head = _head(root.pull_request, before=root.before)
    if head is None:
        return event
    if root.action == "synchronize":  # new commits on the head branch
        return replace(event, kind=EventKind.CHANGE_REQUEST_PUSHED, head=head)
    return replace(event, head=head)


def _head(data: p.Issue, *, before: str | None) -> HeadRef | None:
    """The head commit and base branch of a pull request, when the payload has them."""
    if data.head is None or not data.head.sha:
        return None
    base = data.base.ref if data.base is not None else ""
    return HeadRef(sha=data.head.sha, base_branch=base, before_sha=before, draft=bool(data.draft))


def _issue_event(
    name: str,
    delivery_id: str,
    root: p.IssuesEvent | p.PullRequestEvent,
    data: p.Issue,
    *,
    change_request: bool,
) -> ForgeEvent:
    """An issue or pull request opened, labelled, closed, ...: the same shape on both."""
    repo = _repo(root.repository, root.installation)
    issue = _issue(data, repo, change_request=change_request)
    kind = _ISSUE_KINDS.get(root.action or "", EventKind.ISSUE_OTHER)
    fields = _label_fields(root.action, root.label)
    return _event(name, delivery_id, root, kind, repo=repo, issue=issue, **fields)


def _issue_comment(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_ISSUE_COMMENT, body)
    repo = _repo(root.repository, root.installation)
    issue = _issue(root.issue, repo, change_request=root.issue.pull_request is not None)
    comment = _comment(root.comment, review=False)
    kind = EventKind.COMMENT_CREATED if root.action == "created" else EventKind.COMMENT_OTHER
    return _event(name, delivery_id, root, kind, repo=repo, issue=issue, comment=comment)


def _review(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_REVIEW, body)
    repo = _repo(root.repository, root.installation)
    issue = _issue(root.pull_request, repo, change_request=True)
    comment = _comment(root.review, review=True)
    kind = EventKind.REVIEW_SUBMITTED if root.action == "submitted" else EventKind.COMMENT_OTHER
    extra = {"review_state": root.review.state or ""}
    review = ReviewRef(
        review_id=root.review.id,
        state=(root.review.state or "").lower(),
        commit_sha=root.review.commit_id,
    )
    return _event(
        name,
        delivery_id,
        root,
        kind,
        repo=repo,
        issue=issue,
        comment=comment,
        extra=extra,
        review=review,
    )


def _review_comment(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_REVIEW_COMMENT, body)
    repo = _repo(root.repository, root.installation)
    issue = _issue(root.pull_request, repo, change_request=True)
    comment = _comment(root.comment, review=True)
    kind = EventKind.REVIEW_COMMENT if root.action == "created" else EventKind.COMMENT_OTHER
    data = root.comment
    extra = {"path": data.path, "line": data.line}
    review = ReviewRef(
        review_id=data.pull_request_review_id,
        in_reply_to=data.in_reply_to_id,
        path=data.path,
        line=data.line,
        commit_sha=data.commit_id,
    )
    return _event(
        name,
        delivery_id,
        root,
        kind,
        repo=repo,
        issue=issue,
        comment=comment,
        extra=extra,
        review=review,
    )


def _names(repositories: list[p.FullName] | None) -> list[str]:
    return [repo.full_name for repo in repositories or ()]


def _installation(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_INSTALLATION, body)
    if name == "installation":
        listed = _names(root.repositories)
        added = listed if root.action == "created" else []
        removed = listed if root.action == "deleted" else []
    else:
        added = _names(root.repositories_added)
        removed = _names(root.repositories_removed)
    account = root.installation.account
    extra = {
        "scope_id": str(root.installation.id),
        "account": account.login if account is not None else "",
        "repositories_added": added,
        "repositories_removed": removed,
    }
    return _event(name, delivery_id, root, EventKind.INSTALLATION, extra=extra)


def _ping(name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_PING, body)
    repository = root.repository
    repo = _repo(repository, root.installation) if repository is not None else None
    extra = {"hook_id": root.hook_id, "zen": root.zen or ""}
    return _event(name, delivery_id, root, EventKind.PING, repo=repo, extra=extra)


def _ignored(name: str, delivery_id: str, root: p.Loose) -> ForgeEvent:
    """Events the bot does not handle: keep who and where when the payload says so."""
    try:
        actor = _actor(convert(root.sender, p.User, "payload.sender"))
    except PayloadError:
        actor = Actor(login="")
    try:
        repository = convert(root.repository, p.Repository, "payload.repository")
        installation = (
            None
            if root.installation is None
            else convert(root.installation, p.Installation, "payload.installation")
        )
        repo: RepoRef | None = _repo(repository, installation)
    except PayloadError:
        repo = None
    return ForgeEvent(
        forge=ForgeKind.GITHUB,
        kind=EventKind.IGNORED,
        name=name,
        action=root.action if isinstance(root.action, str) else "",
        delivery_id=delivery_id,
        actor=actor,
        repo=repo,
    )


_ISSUES = decoder(p.IssuesEvent)
_ISSUE_COMMENT = decoder(p.IssueCommentEvent)
_PULL_REQUEST = decoder(p.PullRequestEvent)
_REVIEW = decoder(p.ReviewEvent)
_REVIEW_COMMENT = decoder(p.ReviewCommentEvent)
_INSTALLATION = decoder(p.InstallationEvent)
_PING = decoder(p.PingEvent)
_LOOSE = decoder(p.Loose)

_Handler = Callable[[str, str, bytes], ForgeEvent]

_HANDLERS: dict[str, _Handler] = {
    "issues": _issues,
    "issue_comment": _issue_comment,
    "pull_request": _pull_request,
    "pull_request_review": _review,
    "pull_request_review_comment": _review_comment,
    "installation": _installation,
    "installation_repositories": _installation,
    "ping": _ping,
    **github_ci.HANDLERS,
}
