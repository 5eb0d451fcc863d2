"""GitLab webhooks: verify the token and parse payloads into ``ForgeEvent``.

Sans-I/O and pure. GitLab sends the event name in ``X-Gitlab-Event``, the shared
secret verbatim in ``X-Gitlab-Token`` (no HMAC), and ``Idempotency-Key`` (kept
across redeliveries) plus ``X-Gitlab-Event-UUID`` on every request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from typing import Any

from bot.events import Actor, CommentRef, EventKind, ForgeEvent, ForgeKind, IssueRef, RepoRef
from bot.webhooks.errors import PayloadError

ISSUE_EVENTS = frozenset({"Issue Hook", "Confidential Issue Hook"})
MERGE_REQUEST_EVENT = "Merge Request Hook"
NOTE_EVENTS = frozenset({"Note Hook", "Confidential Note Hook"})

_ISSUE_ACTIONS = {
    "open": EventKind.ISSUE_OPENED,
    "close": EventKind.ISSUE_CLOSED,
    "merge": EventKind.ISSUE_CLOSED,
}
_NOTEABLE_CHANGE_REQUEST = {"Issue": False, "MergeRequest": True}

# Project / group access-token users: ``project_<id>_bot_<hex>`` (GitLab >= 16) and the
# older ``project_<id>_bot`` / ``project_<id>_bot<n>``; service accounts likewise.
_TOKEN_BOT = re.compile(r"^(project|group)_\d+_bot(\d*|_[0-9a-f]+)$")
_SERVICE_ACCOUNT = re.compile(r"^service_account_(group_\d+_)?[0-9a-f]+$")
_INTERNAL_BOTS = frozenset(
    {"alert-bot", "support-bot", "visual-review-bot", "ghost", "automation-bot", "security-bot"}
)


def verify_token(header_value: str | None, *, secret: str) -> bool:
    """Whether ``X-Gitlab-Token`` equals the configured secret (constant time)."""
    if header_value is None or not secret:
        return False
    return hmac.compare_digest(header_value.encode(), secret.encode())


def delivery_key(headers: Mapping[str, str], body: bytes) -> str:
    """A key that is the same for a delivery and its redeliveries."""
    lowered = {key.lower(): value.strip() for key, value in headers.items()}
    if lowered.get("idempotency-key"):
        return f"gitlab:idem:{lowered['idempotency-key']}"
    if lowered.get("x-gitlab-event-uuid"):
        return f"gitlab:uuid:{lowered['x-gitlab-event-uuid']}"
    return f"gitlab:sha256:{hashlib.sha256(body).hexdigest()}"


def is_bot_user(username: str, *, bot_flag: object = None) -> bool:
    """Whether a GitLab user looks like a bot (access-token bot, service account, ...)."""
    if bot_flag is True:
        return True
    name = username.lower()
    return (
        bool(_TOKEN_BOT.match(name) or _SERVICE_ACCOUNT.match(name))
        or name in _INTERNAL_BOTS
        or name.endswith("[bot]")
    )


def parse_event(event_name: str, delivery_id: str, payload: dict[str, Any]) -> ForgeEvent:
    """Turn one GitLab webhook delivery into a ``ForgeEvent``.

    Raises ``PayloadError`` naming the missing or mistyped field when an event the
    bot reacts to does not have the documented shape. Other events are IGNORED.
    """
    if not isinstance(payload, dict):
        raise PayloadError(f"payload must be a JSON object, got {type(payload).__name__}")
    parser = _PARSERS.get(event_name)
    if parser is None:
        return _ignored(event_name, delivery_id, payload)
    return parser(event_name, delivery_id, payload)


# --- field access ----------------------------------------------------------------------------


def _field(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data or data[key] is None:
        raise PayloadError(f"{where}.{key} is missing")
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise PayloadError(f"{where}.{key} has the wrong type ({type(value).__name__})")
    return value


def _optional(data: Mapping[str, Any], key: str, kind: type, where: str, default: Any) -> Any:
    if data.get(key) is None:
        return default
    return _field(data, key, kind, where)


def _label_titles(labels: object, where: str) -> tuple[str, ...]:
    if labels is None:
        return ()
    if not isinstance(labels, list):
        raise PayloadError(f"{where} must be a list")
    return tuple(_field(label, "title", str, f"{where}[]") for label in _dicts(labels, where))


def _dicts(items: list[Any], where: str) -> list[dict[str, Any]]:
    if not all(isinstance(item, dict) for item in items):
        raise PayloadError(f"{where} must hold objects")
    return items


# --- shared parts ------------------------------------------------------------------------------


def _actor(payload: dict[str, Any]) -> Actor:
    user = _field(payload, "user", dict, "payload")
    username = _field(user, "username", str, "user")
    user_id = user.get("id")
    return Actor(
        login=username,
        id="" if user_id is None else str(user_id),
        is_bot=is_bot_user(username, bot_flag=user.get("bot")),
    )


def _repo(payload: dict[str, Any]) -> RepoRef:
    project = _field(payload, "project", dict, "payload")
    return RepoRef(
        forge=ForgeKind.GITLAB,
        full_name=_field(project, "path_with_namespace", str, "project"),
        project_id=_field(project, "id", int, "project"),
        default_branch=_optional(project, "default_branch", str, "project", None),
        web_url=_optional(project, "web_url", str, "project", ""),
    )


def _state(raw: str) -> str:
    return "open" if raw == "opened" else raw


def _issue_ref(
    repo: RepoRef,
    data: dict[str, Any],
    where: str,
    *,
    change_request: bool,
    author: str = "",
    web_url: str = "",
) -> IssueRef:
    """``web_url`` stands in when ``data`` has no ``url`` (note hooks give none)."""
    labels = data.get("labels")
    return IssueRef(
        repo=repo,
        number=_field(data, "iid", int, where),
        is_change_request=change_request,
        title=_optional(data, "title", str, where, ""),
        body=_optional(data, "description", str, where, ""),
        web_url=_optional(data, "url", str, where, "") or web_url,
        author=author,
        state=_state(_optional(data, "state", str, where, "opened")),
        labels=_label_titles(labels, f"{where}.labels"),
        head_branch=(
            _optional(data, "source_branch", str, where, None) if change_request else None
        ),
        head_repo=_head_repo(repo, data, where) if change_request else None,
    )


def _head_repo(repo: RepoRef, data: dict[str, Any], where: str) -> str | None:
    """The project the merge request's source branch is in (a fork's path when it differs)."""
    source = _optional(data, "source_project_id", int, where, None)
    if source is not None and source == _optional(data, "target_project_id", int, where, None):
        return repo.full_name
    project = data.get("source")
    if isinstance(project, dict):
        path: str | None = _optional(project, "path_with_namespace", str, f"{where}.source", None)
        return path
    return None


def _noteable_url(note_url: str) -> str:
    """The issue's or merge request's page: a note's url without its ``#note_<id>``."""
    page, _, fragment = note_url.partition("#")
    return page if fragment.startswith("note_") else ""


def labels_added(payload: dict[str, Any]) -> tuple[str, ...]:
    """Label titles in ``changes.labels.current`` that were not in ``previous``."""
    changes = payload.get("changes")
    if not isinstance(changes, dict) or changes.get("labels") is None:
        return ()
    change = _field(changes, "labels", dict, "changes")
    previous = set(_label_titles(change.get("previous"), "changes.labels.previous"))
    current = _label_titles(change.get("current"), "changes.labels.current")
    return tuple(title for title in current if title not in previous)


# --- events ------------------------------------------------------------------------------------


def _parse_issuable(event_name: str, delivery_id: str, payload: dict[str, Any]) -> ForgeEvent:
    change_request = event_name == MERGE_REQUEST_EVENT
    attrs = _field(payload, "object_attributes", dict, "payload")
    actor = _actor(payload)
    repo = _repo(payload)
    action = _optional(attrs, "action", str, "object_attributes", "")
    if "labels" not in attrs and "labels" in payload:
        attrs = {**attrs, "labels": payload["labels"]}
    # Only the ``open`` action tells who the author is: the user who opened it.
    author = actor.login if action == "open" else ""
    issue = _issue_ref(
        repo, attrs, "object_attributes", change_request=change_request, author=author
    )
    added = labels_added(payload)
    kind = _ISSUE_ACTIONS.get(action, EventKind.ISSUE_OTHER)
    if action == "update" and added:
        kind = EventKind.ISSUE_LABELED
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
    )


def _parse_note(event_name: str, delivery_id: str, payload: dict[str, Any]) -> ForgeEvent:
    attrs = _field(payload, "object_attributes", dict, "payload")
    noteable_type = _field(attrs, "noteable_type", str, "object_attributes")
    change_request = _NOTEABLE_CHANGE_REQUEST.get(noteable_type)
    if change_request is None:
        return _ignored(event_name, delivery_id, payload, noteable_type=noteable_type)
    actor = _actor(payload)
    repo = _repo(payload)
    key = "merge_request" if change_request else "issue"
    note_url = _optional(attrs, "url", str, "object_attributes", "")
    issue = _issue_ref(
        repo,
        _field(payload, key, dict, "payload"),
        key,
        change_request=change_request,
        web_url=_noteable_url(note_url),
    )
    comment = CommentRef(
        id=_field(attrs, "id", int, "object_attributes"),
        body=_field(attrs, "note", str, "object_attributes"),
        author=actor.login,
        web_url=note_url,
    )
    action = _optional(attrs, "action", str, "object_attributes", "create")
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
        extra={"noteable_type": noteable_type},
    )


def _note_kind(attrs: dict[str, Any], action: str, *, change_request: bool) -> EventKind:
    """A new note; on a merge request, a ``DiffNote`` is a comment on a line of the diff."""
    if action != "create" or attrs.get("system") is True:
        return EventKind.COMMENT_OTHER
    note_type = _optional(attrs, "type", str, "object_attributes", None)
    if change_request and note_type == "DiffNote":
        return EventKind.REVIEW_COMMENT
    return EventKind.COMMENT_CREATED


def _ignored(
    event_name: str, delivery_id: str, payload: dict[str, Any], **extra: Any
) -> ForgeEvent:
    """An event the bot does not act on; who and where are filled in when present."""
    try:
        actor = _actor(payload)
    except PayloadError:  # push and member hooks name the user in ``user_username``
        login = payload.get("user_username")
        login = login if isinstance(login, str) else ""
        actor = Actor(login=login, is_bot=bool(login) and is_bot_user(login))
    try:
        repo: RepoRef | None = _repo(payload)
    except PayloadError:
        repo = None
    attrs = payload.get("object_attributes")
    action = attrs.get("action") if isinstance(attrs, dict) else None
    return ForgeEvent(
        forge=ForgeKind.GITLAB,
        kind=EventKind.IGNORED,
        name=event_name,
        action=action if isinstance(action, str) else "",
        delivery_id=delivery_id,
        actor=actor,
        repo=repo,
        extra=extra,
    )


_Parser = Callable[[str, str, dict[str, Any]], ForgeEvent]
_PARSERS: dict[str, _Parser] = {
    **dict.fromkeys(ISSUE_EVENTS, _parse_issuable),
    MERGE_REQUEST_EVENT: _parse_issuable,
    **dict.fromkeys(NOTE_EVENTS, _parse_note),
}
