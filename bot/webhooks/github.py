"""GitHub webhooks: verify the signature and parse the payload. Pure: no I/O.

``verify_signature`` checks ``X-Hub-Signature-256`` against the raw body;
``parse_event`` turns ``X-GitHub-Event`` plus the JSON payload into the bot's
forge-neutral ``ForgeEvent``; ``delivery_key`` names a delivery for de-duplication.
A payload without the shape its event promises raises ``PayloadError`` naming the key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from typing import Any

from bot.events import Actor, CommentRef, EventKind, ForgeEvent, ForgeKind, IssueRef, RepoRef
from bot.webhooks.errors import PayloadError

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
    expected = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    given = signature_header[len(SIGNATURE_PREFIX) :].strip().lower()
    return hmac.compare_digest(expected.encode("ascii"), given.encode("ascii", errors="replace"))


def delivery_key(delivery_id: str | None, app_id: str | None, body: bytes) -> str:
    """``github:<app>:<delivery>``; without a delivery id, ``github:sha256:<body hash>``."""
    delivery = (delivery_id or "").strip()
    if delivery:
        return f"github:{app_id or '-'}:{delivery}"
    return f"github:sha256:{hashlib.sha256(body).hexdigest()}"


class _Obj:
    """Typed access to one JSON object of a payload; errors name the key path."""

    def __init__(self, data: object, path: str) -> None:
        if not isinstance(data, Mapping):
            raise PayloadError(f"{path}: expected an object, got {_type_name(data)}")
        self._data: Mapping[str, Any] = data
        self.path = path

    def has(self, key: str) -> bool:
        return self._data.get(key) is not None

    def flag(self, key: str) -> bool:
        return self._data.get(key) is True

    def raw(self, key: str) -> Any:
        return self._data.get(key)

    def _need(self, key: str) -> Any:
        if self._data.get(key) is None:
            raise PayloadError(f"{self.path}.{key}: missing")
        return self._data[key]

    def _check(self, key: str, value: Any, kind: type, name: str) -> Any:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise PayloadError(f"{self.path}.{key}: expected {name}, got {_type_name(value)}")
        return value

    def obj(self, key: str) -> _Obj:
        return _Obj(self._need(key), f"{self.path}.{key}")

    def opt_obj(self, key: str) -> _Obj | None:
        return self.obj(key) if self.has(key) else None

    def text(self, key: str) -> str:
        return str(self._check(key, self._need(key), str, "a string"))

    def opt_text(self, key: str) -> str | None:
        return self.text(key) if self.has(key) else None

    def integer(self, key: str) -> int:
        return int(self._check(key, self._need(key), int, "an integer"))

    def opt_integer(self, key: str) -> int | None:
        return self.integer(key) if self.has(key) else None

    def objects(self, key: str) -> list[_Obj]:
        """The objects of an array; a missing or null array is empty."""
        if not self.has(key):
            return []
        items = self._check(key, self._data[key], list, "an array")
        return [_Obj(item, f"{self.path}.{key}[{i}]") for i, item in enumerate(items)]


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def parse_event(event_name: str, delivery_id: str, payload: dict[str, Any]) -> ForgeEvent:
    """The ``ForgeEvent`` for one delivery; events the bot does not handle are IGNORED."""
    try:
        root = _Obj(payload, "payload")
        handler = _HANDLERS.get(event_name)
        if handler is None:
            return _ignored(event_name, delivery_id, root)
        return handler(event_name, delivery_id, root)
    except PayloadError as exc:
        raise PayloadError(f"GitHub {event_name!r} event: {exc}") from None


def _event(name: str, delivery_id: str, root: _Obj, kind: EventKind, **fields: Any) -> ForgeEvent:
    return ForgeEvent(
        forge=ForgeKind.GITHUB,
        kind=kind,
        name=name,
        action=root.opt_text("action") or "",
        delivery_id=delivery_id,
        actor=_actor(root.obj("sender")),
        **fields,
    )


def _actor(sender: _Obj) -> Actor:
    login = sender.text("login")
    is_bot = sender.opt_text("type") == "Bot" or login.endswith("[bot]")
    return Actor(login=login, id=str(sender.integer("id")), is_bot=is_bot)


def _scope_id(root: _Obj) -> str | None:
    installation = root.opt_obj("installation")
    return str(installation.integer("id")) if installation is not None else None


def _repo(root: _Obj) -> RepoRef:
    repository = root.obj("repository")
    return RepoRef(
        forge=ForgeKind.GITHUB,
        full_name=repository.text("full_name"),
        scope_id=_scope_id(root),
        default_branch=repository.opt_text("default_branch"),
        web_url=repository.opt_text("html_url") or "",
    )


def _issue(data: _Obj, repo: RepoRef, *, change_request: bool) -> IssueRef:
    state = data.opt_text("state") or "open"
    if change_request and data.flag("merged"):
        state = "merged"
    head = data.opt_obj("head")
    head_repo = head.opt_obj("repo") if head is not None else None  # null: fork deleted
    return IssueRef(
        repo=repo,
        number=data.integer("number"),
        is_change_request=change_request,
        title=data.text("title"),
        body=data.opt_text("body") or "",
        web_url=data.opt_text("html_url") or "",
        author=data.obj("user").text("login"),
        state=state,
        labels=tuple(label.text("name") for label in data.objects("labels")),
        head_branch=head.text("ref") if head is not None else None,
        head_repo=head_repo.text("full_name") if head_repo is not None else None,
    )


def _comment(data: _Obj, *, review: bool) -> CommentRef:
    return CommentRef(
        id=data.integer("id"),
        body=data.opt_text("body") or "",
        author=data.obj("user").text("login"),
        web_url=data.opt_text("html_url") or "",
        is_review_comment=review,
    )


def _label_fields(root: _Obj) -> dict[str, Any]:
    action = root.opt_text("action")
    if action == "labeled":
        name = root.obj("label").text("name")
        return {"label_added": name, "labels_added": (name,)}
    if action == "unlabeled":
        return {"extra": {"label_removed": root.obj("label").text("name")}}
    return {}


def _issues(name: str, delivery_id: str, root: _Obj) -> ForgeEvent:
    repo = _repo(root)
    data = root.obj("issue")
    issue = _issue(data, repo, change_request=data.has("pull_request"))
    kind = _ISSUE_KINDS.get(root.opt_text("action") or "", EventKind.ISSUE_OTHER)
    return _event(name, delivery_id, root, kind, repo=repo, issue=issue, **_label_fields(root))


def _pull_request(name: str, delivery_id: str, root: _Obj) -> ForgeEvent:
    repo = _repo(root)
    issue = _issue(root.obj("pull_request"), repo, change_request=True)
    kind = _ISSUE_KINDS.get(root.opt_text("action") or "", EventKind.ISSUE_OTHER)
    return _event(name, delivery_id, root, kind, repo=repo, issue=issue, **_label_fields(root))


def _issue_comment(name: str, delivery_id: str, root: _Obj) -> ForgeEvent:
    repo = _repo(root)
    data = root.obj("issue")
    issue = _issue(data, repo, change_request=data.has("pull_request"))
    comment = _comment(root.obj("comment"), review=False)
    created = root.opt_text("action") == "created"
    kind = EventKind.COMMENT_CREATED if created else EventKind.COMMENT_OTHER
    return _event(name, delivery_id, root, kind, repo=repo, issue=issue, comment=comment)


def _review(name: str, delivery_id: str, root: _Obj) -> ForgeEvent:
    repo = _repo(root)
    issue = _issue(root.obj("pull_request"), repo, change_request=True)
    review = root.obj("review")
    comment = _comment(review, review=True)
    submitted = root.opt_text("action") == "submitted"
    kind = EventKind.REVIEW_SUBMITTED if submitted else EventKind.COMMENT_OTHER
    extra = {"review_state": review.opt_text("state") or ""}
    return _event(
        name, delivery_id, root, kind, repo=repo, issue=issue, comment=comment, extra=extra
    )


def _review_comment(name: str, delivery_id: str, root: _Obj) -> ForgeEvent:
    repo = _repo(root)
    issue = _issue(root.obj("pull_request"), repo, change_request=True)
    data = root.obj("comment")
    comment = _comment(data, review=True)
    created = root.opt_text("action") == "created"
    kind = EventKind.REVIEW_COMMENT if created else EventKind.COMMENT_OTHER
    extra = {"path": data.opt_text("path"), "line": data.opt_integer("line")}
    return _event(
        name, delivery_id, root, kind, repo=repo, issue=issue, comment=comment, extra=extra
    )


def _repo_names(root: _Obj, key: str) -> list[str]:
    return [repo.text("full_name") for repo in root.objects(key)]


def _installation(name: str, delivery_id: str, root: _Obj) -> ForgeEvent:
    installation = root.obj("installation")
    account = installation.opt_obj("account")
    action = root.opt_text("action")
    if name == "installation":
        listed = _repo_names(root, "repositories")
        added = listed if action == "created" else []
        removed = listed if action == "deleted" else []
    else:
        added = _repo_names(root, "repositories_added")
        removed = _repo_names(root, "repositories_removed")
    extra = {
        "scope_id": str(installation.integer("id")),
        "account": account.text("login") if account is not None else "",
        "repositories_added": added,
        "repositories_removed": removed,
    }
    return _event(name, delivery_id, root, EventKind.INSTALLATION, extra=extra)


def _ping(name: str, delivery_id: str, root: _Obj) -> ForgeEvent:
    repo = _repo(root) if root.has("repository") else None
    extra = {"hook_id": root.opt_integer("hook_id"), "zen": root.opt_text("zen") or ""}
    return _event(name, delivery_id, root, EventKind.PING, repo=repo, extra=extra)


def _ignored(name: str, delivery_id: str, root: _Obj) -> ForgeEvent:
    """Events the bot does not handle: keep who and where when the payload says so."""
    try:
        actor = _actor(root.obj("sender"))
    except PayloadError:
        actor = Actor(login="")
    try:
        repo: RepoRef | None = _repo(root)
    except PayloadError:
        repo = None
    action = root.raw("action")
    return ForgeEvent(
        forge=ForgeKind.GITHUB,
        kind=EventKind.IGNORED,
        name=name,
        action=action if isinstance(action, str) else "",
        delivery_id=delivery_id,
        actor=actor,
        repo=repo,
    )


_Handler = Callable[[str, str, _Obj], ForgeEvent]

_HANDLERS: dict[str, _Handler] = {
    "issues": _issues,
    "issue_comment": _issue_comment,
    "pull_request": _pull_request,
    "pull_request_review": _review,
    "pull_request_review_comment": _review_comment,
    "installation": _installation,
    "installation_repositories": _installation,
    "ping": _ping,
}
