"""The GitLab adapter: the ``Forge`` protocol over python-gitlab.

The transport (thread pool, retries by the shared policy, write pacing, typed
errors) lives in ``gitlab_client.GitLabClient``; the project, its content, branches,
commits and merge requests in ``gitlab_git.GitLabGit``. This module says which
python-gitlab call serves issues, notes, labels and members, and delegates the rest.
The token travels only in the ``PRIVATE-TOKEN`` header and, for git, in
``CloneAuth.password``; never in a URL or a log line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gitlab.exceptions import GitlabError

from bot.config import GitLabSettings
from bot.events import Actor, ForgeKind, IssueRef, RepoRef
from bot.forges.base import (
    CloneAuth,
    Comment,
    Conflict,
    ForgeError,
    IssueDetails,
    Permission,
)
from bot.forges.content import DelegatedContent, DelegatedFollowUp
from bot.forges.gitlab_client import GitLabClient
from bot.forges.gitlab_followup import GitLabFollowUp
from bot.forges.gitlab_git import (
    GitLabGit,
    commit_actions,
    draft_title,
    project_handle,
    user_id,
)
from bot.forges.retry import WritePacer

__all__ = ["GitLabForge", "commit_actions", "draft_title", "permission_for"]

T = TypeVar("T")

# GitLab access levels: Guest 10, Planner 15, Reporter 20, Developer 30, Maintainer 40, Owner 50.
_ACCESS = ((50, Permission.ADMIN), (40, Permission.MAINTAIN), (30, Permission.WRITE))
_ACCESS_LOW = ((15, Permission.TRIAGE), (10, Permission.READ))
# GitHub reaction names the bot uses -> GitLab award emoji names.
_EMOJI = {"+1": "thumbsup", "-1": "thumbsdown", "laugh": "laughing", "hooray": "tada"}
_HEX_COLOR = re.compile(r"[0-9a-fA-F]{3}|[0-9a-fA-F]{6}")


# --- pure decisions --------------------------------------------------------------------------


def permission_for(access_level: int | None) -> Permission:
    """A GitLab member access level as the bot's ``Permission``."""
    if access_level is None:
        return Permission.NONE
    for floor, permission in (*_ACCESS, *_ACCESS_LOW):
        if access_level >= floor:
            return permission
    return Permission.NONE


def _label_names(labels: object) -> tuple[str, ...]:
    if not isinstance(labels, list):
        return ()
    return tuple(item["name"] if isinstance(item, dict) else str(item) for item in labels)


def _issue_ref(repo: RepoRef, data: Mapping[str, Any], *, change_request: bool) -> IssueRef:
    state = data.get("state") or "opened"
    return IssueRef(
        repo=repo,
        number=int(data["iid"]),
        is_change_request=change_request,
        title=data.get("title") or "",
        body=data.get("description") or "",
        web_url=data.get("web_url") or "",
        author=(data.get("author") or {}).get("username", ""),
        author_id=user_id(data.get("author")),
        state="open" if state == "opened" else state,
        labels=_label_names(data.get("labels")),
        head_branch=data.get("source_branch") if change_request else None,
    )


def _comment(data: Mapping[str, Any], issue_url: str) -> Comment:
    note_id = int(data["id"])
    return Comment(
        id=note_id,
        body=data.get("body") or "",
        author=(data.get("author") or {}).get("username", ""),
        author_id=user_id(data.get("author")),
        web_url=f"{issue_url}#note_{note_id}" if issue_url else "",
        # ``internal`` since GitLab 15.0; ``confidential`` before (and still sent).
        internal=bool(data.get("internal") or data.get("confidential")),
    )


def _what(issue: IssueRef) -> str:
    sign = "merge request !" if issue.is_change_request else "issue #"
    return f"{sign}{issue.number} in {issue.repo.full_name}"


class GitLabForge(DelegatedContent, DelegatedFollowUp):
    """A GitLab instance (gitlab.com or self-hosted) reached with one access token."""

    kind = ForgeKind.GITLAB

    def __init__(self, client: GitLabClient) -> None:
        self._client = client
        self._gl = client.gl
        self._git = GitLabGit(client)
        self._followup = GitLabFollowUp(client)

    @classmethod
    def from_settings(
        cls, settings: GitLabSettings, *, pacer: WritePacer | None = None
    ) -> GitLabForge:
        if settings.token is None:
            raise ValueError("gitlab.token is not configured")
        return cls(
            GitLabClient(url=settings.url, token=settings.token.get_secret_value(), pacer=pacer)
        )

    # --- calling -------------------------------------------------------------------------------

    async def _read(self, what: str, op: Callable[[], T]) -> T:
        return await self._client.read(what, op)

    async def _write(self, what: str, op: Callable[[], T]) -> T:
        return await self._client.write(what, op)

    async def _exists(self, what: str, op: Callable[[], object]) -> bool:
        return await self._client.exists(what, op)

    def _project(self, repo: RepoRef) -> Any:
        return project_handle(self._gl, repo)

    def _issuables(self, repo: RepoRef, change_request: bool) -> Any:
        project = self._project(repo)
        return project.mergerequests if change_request else project.issues

    def _issuable(self, issue: IssueRef) -> Any:
        return self._issuables(issue.repo, issue.is_change_request).get(issue.number, lazy=True)

    # --- issues and comments -----------------------------------------------------------------

    async def get_issue(
        self, repo: RepoRef, number: int, *, change_request: bool, comments: bool = True
    ) -> IssueDetails:
        def op() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            found = self._issuables(repo, change_request).get(number)
            if not comments:
                return found.attributes, []
            notes = found.notes.list(get_all=True, sort="asc", order_by="created_at")
            return found.attributes, [note.attributes for note in notes]

        ref = IssueRef(repo=repo, number=number, is_change_request=change_request)
        data, notes = await self._read(_what(ref), op)
        issue = _issue_ref(repo, data, change_request=change_request)
        said = tuple(_comment(note, issue.web_url) for note in notes if not note.get("system"))
        return IssueDetails(issue=issue, comments=said, confidential=bool(data.get("confidential")))

    async def get_comment(self, issue: IssueRef, comment_id: int) -> Comment:
        """The note ``comment_id`` of this issue or merge request (404 when it is on another)."""

        def op() -> dict[str, Any]:
            return dict(self._issuable(issue).notes.get(comment_id).attributes)

        return _comment(await self._read(f"note {comment_id} on {_what(issue)}", op), issue.web_url)

    async def label_added_by(self, issue: IssueRef, label: str) -> str | None:
        """Who last added ``label``, from the issue's resource label events."""

        def op() -> list[dict[str, Any]]:
            events = self._issuable(issue).resourcelabelevents.list(get_all=True)
            return [dict(event.attributes) for event in events]

        who = None
        for event in await self._read(f"label events of {_what(issue)}", op):
            name = (event.get("label") or {}).get("name")
            if event.get("action") == "add" and name == label:
                who = (event.get("user") or {}).get("username") or None
        return who

    async def create_comment(self, issue: IssueRef, body: str) -> Comment:
        def op() -> dict[str, Any]:
            return dict(self._issuable(issue).notes.create({"body": body}).attributes)

        return _comment(await self._write(_what(issue), op), issue.web_url)

    async def edit_comment(self, issue: IssueRef, comment_id: int, body: str) -> None:
        def op() -> None:
            self._issuable(issue).notes.update(comment_id, {"body": body})

        await self._write(f"note {comment_id} on {_what(issue)}", op)

    async def add_reaction(
        self, issue: IssueRef, comment_id: int | None, reaction: str, *, line_comment: bool = False
    ) -> None:
        """GitLab's notes are one kind, on a line of the diff or not: ``line_comment``
        changes nothing."""

        def op() -> None:
            target = self._issuable(issue)
            if comment_id is not None:
                target = target.notes.get(comment_id, lazy=True)
            target.awardemojis.create({"name": _EMOJI.get(reaction, reaction)})

        try:
            await self._write(f"award emoji on {_what(issue)}", op)
        except ForgeError as exc:
            if "already been taken" not in str(exc).lower():
                raise

    # --- labels --------------------------------------------------------------------------------

    async def ensure_label(self, repo: RepoRef, name: str, *, color: str, description: str) -> None:
        what = f"label {name!r} in {repo.full_name}"
        if await self._exists(what, lambda: self._project(repo).labels.get(name)):
            return
        gitlab_color = f"#{color}" if _HEX_COLOR.fullmatch(color) else color
        data = {"name": name, "color": gitlab_color, "description": description}
        try:
            await self._write(what, lambda: self._project(repo).labels.create(data))
        except Conflict:
            return  # created meanwhile

    async def create_issue(
        self, repo: RepoRef, *, title: str, body: str, labels: list[str]
    ) -> IssueRef:
        data = {"title": title, "description": body, "labels": ",".join(labels)}

        def op() -> dict[str, Any]:
            return dict(self._project(repo).issues.create(data).attributes)

        made = await self._write(f"a new issue in {repo.full_name}", op)
        return _issue_ref(repo, made, change_request=False)

    async def add_labels(self, issue: IssueRef, labels: list[str]) -> None:
        if labels:
            await self._update_issuable(issue, {"add_labels": ",".join(labels)})

    async def remove_label(self, issue: IssueRef, label: str) -> None:
        await self._update_issuable(issue, {"remove_labels": label})

    async def _update_issuable(self, issue: IssueRef, data: dict[str, str]) -> None:
        def op() -> None:
            self._issuables(issue.repo, issue.is_change_request).update(issue.number, data)

        await self._write(_what(issue), op)

    # --- members ------------------------------------------------------------------------------

    async def get_permission(self, repo: RepoRef, user: str) -> Permission:
        def op() -> int | None:
            users = self._gl.users.list(username=user, get_all=False)
            if not users:
                return None
            try:
                member = self._project(repo).members_all.get(users[0].id)
            except GitlabError as exc:
                if exc.response_code == 404:
                    return None
                raise
            states = {member.attributes.get(key) for key in ("state", "membership_state")}
            return int(member.access_level) if states <= {None, "active"} else None

        return permission_for(await self._read(f"member {user} of {repo.full_name}", op))

    async def clone_auth(self, repo: RepoRef) -> CloneAuth:
        info = await self.get_repo_info(repo)
        return CloneAuth(url=info.clone_url, username="oauth2", password=self._client.token)

    async def whoami(self) -> str:
        """The username the token acts as (checks the URL and the token)."""

        def op() -> str:
            self._gl.auth()  # GET /user
            return str(getattr(self._gl.user, "username", ""))

        return await self._read("the token's user (GET /user)", op)

    async def bot_account(self) -> Actor:
        """The token's user (``GET /user``), with its id."""

        def op() -> Actor:
            self._gl.auth()  # GET /user
            user = self._gl.user
            login = str(getattr(user, "username", ""))
            found = getattr(user, "id", None)
            account = str(found) if isinstance(found, int) else ""
            return Actor(login=login, id=account, is_bot=bool(getattr(user, "bot", False)))

        return await self._read("the token's user (GET /user)", op)

    async def aclose(self) -> None:
        self.forget_repo_infos()
        await self._client.aclose()
