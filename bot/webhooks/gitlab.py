"""GitLab webhooks: verify the token and parse payloads into ``ForgeEvent``.

Sans-I/O and pure. GitLab sends the event name in ``X-Gitlab-Event``, the shared
secret verbatim in ``X-Gitlab-Token`` (no HMAC), and ``Idempotency-Key`` (kept
across redeliveries) plus ``X-Gitlab-Event-UUID`` on every request. The raw body is
decoded straight into the event's payload struct (``gitlab_payloads``); a payload
without the shape its event promises raises ``PayloadError`` naming the key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from typing import TypeVar

import msgspec

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
from bot.webhooks import gitlab_ci
from bot.webhooks import gitlab_payloads as p
from bot.webhooks.decode import decode, decoder
from bot.webhooks.errors import PayloadError
from bot.webhooks.gitlab_common import actor as _actor
from bot.webhooks.gitlab_common import is_bot_user
from bot.webhooks.gitlab_common import repo as _repo

T = TypeVar("T")

ISSUE_EVENTS = frozenset({"Issue Hook", "Confidential Issue Hook"})
MERGE_REQUEST_EVENT = "Merge Request Hook"
NOTE_EVENTS = frozenset({"Note Hook", "Confidential Note Hook"})

_ISSUE_ACTIONS = {
    "open": EventKind.ISSUE_OPENED,
    "close": EventKind.ISSUE_CLOSED,
    "merge": EventKind.ISSUE_CLOSED,
}
_NOTEABLE_CHANGE_REQUEST = {"Issue": False, "MergeRequest": True}


def verify_token(header_value: str | None, *, secret: str) -> bool:
    """Whether ``X-Gitlab-Token`` equals the configured secret (constant time)."""
    if header_value is None or not secret:
        return False
    return hmac.compare_digest(header_value.encode(), secret.encode())


def verify_delivery(
    header_value: str | None, body: bytes, *, shared: str | None, scoped: Mapping[str, str]
) -> bool:
    """Whether ``X-Gitlab-Token`` is the right secret for the project the body names.

    ``scoped`` maps project paths and group paths to their own secrets: the most specific
    entry whose path is the project's path or a group above it decides, and then only its
    secret is accepted. A project no entry covers (or a body naming no project) needs the
    ``shared`` secret; without one it is refused. Paths compare without case, as GitLab
    resolves them.
    """
    scope = secret_scope(project_path(body), scoped)
    secret = scoped[scope] if scope is not None else shared
    return secret is not None and verify_token(header_value, secret=secret)


def secret_scope(path: str | None, scoped: Mapping[str, str]) -> str | None:
    """The key of ``scoped`` that covers ``path`` most specifically, or None."""
    if not path:
        return None
    wanted = path.strip("/").lower()
    best: str | None = None
    for key in scoped:
        prefix = key.strip("/").lower()
        covers = prefix and (wanted == prefix or wanted.startswith(prefix + "/"))
        if covers and (best is None or len(prefix) > len(best.strip("/"))):
            best = key
    return best


def project_path(body: bytes) -> str | None:
    """``project.path_with_namespace`` of a delivery's body, or None when it has none."""
    try:
        root = decode(_PROJECT_ONLY, body)
    except PayloadError:
        return None
    return root.project.path_with_namespace if root.project is not None else None


def delivery_key(headers: Mapping[str, str], body: bytes) -> str:
    """A key that is the same for a delivery and its redeliveries."""
    lowered = {key.lower(): value.strip() for key, value in headers.items()}
    if lowered.get("idempotency-key"):
        return f"gitlab:idem:{lowered['idempotency-key']}"
    if lowered.get("x-gitlab-event-uuid"):
        return f"gitlab:uuid:{lowered['x-gitlab-event-uuid']}"
    return f"gitlab:sha256:{hashlib.sha256(body).hexdigest()}"


def labels_added(changes: p.Changes | None) -> tuple[str, ...]:
    """Label titles in ``changes.labels.current`` that were not in ``previous``."""
    change = changes.labels if changes is not None else None
    if change is None:
        return ()
    previous = {label.title for label in change.previous or ()}
    return tuple(label.title for label in change.current or () if label.title not in previous)


def parse_event(event_name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    """Turn one GitLab webhook delivery's raw body into a ``ForgeEvent``.

    Raises ``PayloadError`` naming the missing or mistyped key when the body is not
    JSON, not an object, or an event the bot reacts to does not have the documented
    shape. Other events are IGNORED, with who and where when the payload says so.
    """
    try:
        parser = _PARSERS.get(event_name)
        if parser is None:
            return _ignored(event_name, delivery_id, decode(_LOOSE, body))
        return parser(event_name, delivery_id, body)
    except PayloadError as exc:
        raise PayloadError(f"GitLab {event_name!r} event: {exc}") from None


# --- shared parts ------------------------------------------------------------------------------


def _required(value: T | None, where: str) -> T:
    if value is None:
        raise PayloadError(f"{where}: missing")
    return value


def _state(raw: str | None) -> str:
    if raw is None or raw == "opened":
        return "open"
    return raw


def _issue_ref(
    repo: RepoRef,
    data: p.Issuable,
    *,
    change_request: bool,
    labels: list[p.Label] | None,
    author: str = "",
    web_url: str = "",
) -> IssueRef:
    """``web_url`` stands in when ``data`` has no ``url`` (note hooks give none)."""
    return IssueRef(
        repo=repo,
        number=data.iid,
        is_change_request=change_request,
        title=data.title or "",
        body=data.description or "",
        web_url=data.url or web_url,
        author=author,
        author_id="" if data.author_id is None else str(data.author_id),
        state=_state(data.state),
        labels=tuple(label.title for label in labels or ()),
        head_branch=data.source_branch if change_request else None,
        head_repo=_head_repo(repo, data) if change_request else None,
    )


def _head_repo(repo: RepoRef, data: p.Issuable) -> str | None:
    """The project the merge request's source branch is in (a fork's path when it differs)."""
    source_id = data.source_project_id
    if source_id is not None and source_id == data.target_project_id:
        return repo.full_name
    return data.source.path_with_namespace if data.source is not None else None


def _noteable_url(note_url: str) -> str:
    """The issue's or merge request's page: a note's url without its ``#note_<id>``."""
    page, _, fragment = note_url.partition("#")
    return page if fragment.startswith("note_") else ""


# --- events ------------------------------------------------------------------------------------


def _parse_issuable(event_name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_ISSUABLE, body)
    attrs = root.object_attributes
    actor = _actor(root.user)
    repo = _repo(root.project)
    action = attrs.action or ""
    # Only the ``open`` action tells who the author is: the user who opened it.
    issue = _issue_ref(
        repo,
        attrs,
        change_request=event_name == MERGE_REQUEST_EVENT,
        labels=attrs.labels if attrs.labels is not None else root.labels,
        author=actor.login if action == "open" else "",
    )
    added = labels_added(root.changes)
    kind = _ISSUE_ACTIONS.get(action, EventKind.ISSUE_OTHER)
    if action == "update" and added:
        kind = EventKind.ISSUE_LABELED
    head = _head(attrs) if issue.is_change_request else None
    if action == "update" and attrs.oldrev and not added:  # new commits on the source branch
        kind = EventKind.CHANGE_REQUEST_PUSHED
    return ForgeEvent(
        forge=ForgeKind.GITLAB,
        kind=kind,
        name=event_name,
        action=action,
        delivery_id=delivery_id,
        actor=actor,
        repo=repo,
        issue=issue,
        label_added=added[0] if added else None,
        labels_added=added,
        head=head,
    )


def _head(attrs: p.Issuable) -> HeadRef | None:
    """A merge request's head commit and target branch, when the hook has them."""
    if attrs.last_commit is None:
        return None
    return HeadRef(
        sha=attrs.last_commit.id,
        base_branch=attrs.target_branch or "",
        before_sha=attrs.oldrev,
        draft=bool(attrs.draft or attrs.work_in_progress),
    )


def _parse_note(event_name: str, delivery_id: str, body: bytes) -> ForgeEvent:
    root = decode(_NOTE, body)
    attrs = root.object_attributes
    change_request = _NOTEABLE_CHANGE_REQUEST.get(attrs.noteable_type)
    if change_request is None:
        return _ignored_note(event_name, delivery_id, root)
    actor = _actor(_required(root.user, "payload.user"))
    repo = _repo(_required(root.project, "payload.project"))
    key = "merge_request" if change_request else "issue"
    noteable = root.merge_request if change_request else root.issue
    data = _required(noteable, f"payload.{key}")
    note_url = attrs.url or ""
    issue = _issue_ref(
        repo,
        data,
        change_request=change_request,
        labels=data.labels,
        web_url=_noteable_url(note_url),
    )
    comment = CommentRef(
        id=_required(attrs.id, "payload.object_attributes.id"),
        body=_required(attrs.note, "payload.object_attributes.note"),
        author=actor.login,
        web_url=note_url,
    )
    action = attrs.action or "create"
    return ForgeEvent(
        forge=ForgeKind.GITLAB,
        kind=_note_kind(attrs, action, change_request=change_request),
        name=event_name,
        action=action,
        delivery_id=delivery_id,
        actor=actor,
        repo=repo,
        issue=issue,
        comment=comment,
        extra={"noteable_type": attrs.noteable_type},
        review=_review(attrs) if change_request else None,
    )


def _review(attrs: p.Note) -> ReviewRef:
    """Where a merge request note belongs: its discussion, and its line of the diff."""
    position = attrs.position
    path = line = None
    if position is not None:
        path = position.new_path or position.old_path
        line = position.new_line if position.new_line is not None else position.old_line
    return ReviewRef(
        thread_id=attrs.discussion_id,
        path=path,
        line=line,
        commit_sha=attrs.commit_id or None,
    )


# Notes in a merge request's review threads: on a line of the diff, or in a thread
# started on the merge request (resolvable like a review thread).
_THREAD_NOTES = frozenset({"DiffNote", "DiscussionNote"})


def _note_kind(attrs: p.Note, action: str, *, change_request: bool) -> EventKind:
    """A new note; on a merge request, a ``DiffNote`` (a comment on a line of the diff) or
    a ``DiscussionNote`` (one in a thread) is a review comment."""
    if action != "create" or attrs.system is True:
        return EventKind.COMMENT_OTHER
    if change_request and attrs.type in _THREAD_NOTES:
        return EventKind.REVIEW_COMMENT
    return EventKind.COMMENT_CREATED


def _ignored_note(event_name: str, delivery_id: str, root: p.NoteEvent) -> ForgeEvent:
    """A note on a commit or snippet: not acted on; who and where when the payload says."""
    return ForgeEvent(
        forge=ForgeKind.GITLAB,
        kind=EventKind.IGNORED,
        name=event_name,
        action=root.object_attributes.action or "",
        delivery_id=delivery_id,
        actor=_actor(root.user) if root.user is not None else Actor(login=""),
        repo=_repo(root.project) if root.project is not None else None,
        extra={"noteable_type": root.object_attributes.noteable_type},
    )


def _ignored(event_name: str, delivery_id: str, root: p.Loose) -> ForgeEvent:
    """An event the bot does not act on; who and where are filled in when present."""
    user = _lenient(_USER, root.user)
    project = _lenient(_PROJECT, root.project)
    attrs = _lenient(_ACTION, root.object_attributes)
    action = attrs.action if attrs is not None else None
    return ForgeEvent(
        forge=ForgeKind.GITLAB,
        kind=EventKind.IGNORED,
        name=event_name,
        action=action if isinstance(action, str) else "",
        delivery_id=delivery_id,
        actor=_actor(user) if user is not None else _named_actor(root.user_username, root.user_id),
        repo=_repo(project) if project is not None else None,
    )


def _named_actor(username: object, user_id: object = None) -> Actor:
    """Push and member hooks name the user in ``user_username`` (and ``user_id``) instead
    of ``user``."""
    login = username if isinstance(username, str) else ""
    account = str(user_id) if isinstance(user_id, int) and not isinstance(user_id, bool) else ""
    return Actor(login=login, id=account, is_bot=bool(login) and is_bot_user(login))


def _lenient(dec: msgspec.json.Decoder[T], raw: msgspec.Raw) -> T | None:
    """A raw part of an ignored event as ``dec``'s struct; None when absent or malformed."""
    if not raw:
        return None
    try:
        return decode(dec, bytes(raw))
    except PayloadError:
        return None


_ISSUABLE = decoder(p.IssuableEvent)
_NOTE = decoder(p.NoteEvent)
_LOOSE = decoder(p.Loose)
_PROJECT_ONLY = decoder(p.ProjectOnly)
_USER = decoder(p.User)
_PROJECT = decoder(p.Project)
_ACTION = decoder(p.Action)

_Parser = Callable[[str, str, bytes], ForgeEvent]
_PARSERS: dict[str, _Parser] = {
    **dict.fromkeys(ISSUE_EVENTS, _parse_issuable),
    MERGE_REQUEST_EVENT: _parse_issuable,
    **dict.fromkeys(NOTE_EVENTS, _parse_note),
    **gitlab_ci.PARSERS,
}
