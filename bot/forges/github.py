"""The GitHub adapter: ``bot.forges.base.Forge`` over the GitHub REST API.

Works against github.com and GitHub Enterprise Server (``api_url``), as a GitHub App
(installation tokens; the installation comes from ``RepoRef.scope_id`` or is looked
up) or with a personal token. Credentials, retries, pacing and error mapping live in
``github_auth.GitHubSession``; the repository, its content, branches, commits and pull
requests in ``github_git.GitData``. This module converts payloads and says which
endpoint serves issues, comments, reactions, labels and permissions, and delegates the rest.
"""

from __future__ import annotations

from typing import Any

import httpx

from bot.config import GitHubSettings
from bot.events import Actor, ForgeKind, IssueRef, RepoRef
from bot.forges.base import (
    CloneAuth,
    Comment,
    Conflict,
    IssueDetails,
    NotFound,
    Permission,
)
from bot.forges.content import DelegatedContent, DelegatedFollowUp
from bot.forges.deliveries import DeliveryLog
from bot.forges.github_auth import GitHubSession
from bot.forges.github_client import account_id, reading, repo_url
from bot.forges.github_deliveries import GitHubDeliveries
from bot.forges.github_followup import GitHubFollowUp
from bot.forges.github_git import GitData

REACTIONS = {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}
REACTION_ALIASES = {"thumbsup": "+1", "thumbsdown": "-1", "tada": "hooray"}
ROLES = {"admin": Permission.ADMIN, "maintain": Permission.MAINTAIN, "write": Permission.WRITE}
ROLES |= {"triage": Permission.TRIAGE, "read": Permission.READ, "none": Permission.NONE}


def _comment(data: dict[str, Any]) -> Comment:
    login = (data.get("user") or {}).get("login", "")
    body, url = data.get("body") or "", data.get("html_url") or ""
    return Comment(id=int(data["id"]), body=body, author=str(login), web_url=url,
                   author_id=account_id(data.get("user")))  # fmt: skip


def _issue(
    repo: RepoRef, data: dict[str, Any], head: str | None, head_repo: str | None = None
) -> IssueRef:
    merged = (data.get("pull_request") or {}).get("merged_at")
    labels = data.get("labels") or []
    return IssueRef(
        repo=repo,
        number=int(data["number"]),
        is_change_request=head is not None,
        title=str(data["title"]),
        body=data.get("body") or "",
        web_url=data.get("html_url") or "",
        author=str((data.get("user") or {}).get("login", "")),
        author_id=account_id(data.get("user")),
        state="merged" if merged else str(data["state"]),
        labels=tuple(item if isinstance(item, str) else str(item["name"]) for item in labels),
        head_branch=head,
        head_repo=head_repo,
    )


def _permission(data: dict[str, Any]) -> Permission:
    role = ROLES.get(str(data.get("role_name", "")).lower())  # None for custom roles
    if role is not None:
        return role
    return ROLES.get(str(data.get("permission", "")).lower(), Permission.NONE)


class GitHubForge(DelegatedContent, DelegatedFollowUp):
    """``Forge`` for one GitHub App or token, on github.com or GitHub Enterprise Server."""

    _git: GitData  # also its request helper, for the issue and comment calls here

    kind = ForgeKind.GITHUB

    def __init__(self, session: GitHubSession) -> None:
        self._gh = session
        self._git = GitData(session)
        self._followup = GitHubFollowUp(session, self._git)

    @classmethod
    def from_settings(cls, settings: GitHubSettings, http: httpx.AsyncClient) -> GitHubForge:
        """App credentials when both app_id and the private key are set, else the token."""
        if settings.app_id and settings.private_key is not None:
            key = settings.private_key.get_secret_value()
            return cls(
                GitHubSession(
                    api_url=settings.api_url, http=http, app_id=settings.app_id, private_key=key
                )
            )
        if settings.token is not None:
            token = settings.token.get_secret_value()
            return cls(GitHubSession(api_url=settings.api_url, http=http, token=token))
        raise ValueError(
            "GitHub needs GITHUB_APP_ID with GITHUB_PRIVATE_KEY / GITHUB_PRIVATE_KEY_PATH, "
            "or GITHUB_TOKEN"
        )

    def delivery_log(self) -> DeliveryLog | None:
        """The App's webhook deliveries (``HasDeliveryLog``); a token has none."""
        return GitHubDeliveries(self._gh) if self._gh.is_app else None

    # --- issues and comments ---------------------------------------------------------------

    async def get_issue(
        self, repo: RepoRef, number: int, *, change_request: bool, comments: bool = True
    ) -> IssueDetails:
        """GitHub numbers issues and pull requests together: the issue API serves both."""
        kind = "pull request" if change_request else "issue"
        what = f"{kind} #{number} of {repo.full_name}"
        data = await self._git.call(repo, "GET", ("issues", str(number)), what)
        head = head_repo = None
        if isinstance(data, dict) and data.get("pull_request"):
            pull = await self._git.call(repo, "GET", ("pulls", str(number)), what)
            with reading(what):
                head = str(pull["head"]["ref"])
                source = pull["head"].get("repo")  # null when the fork was deleted
                head_repo = str(source["full_name"]) if source else None
        found: list[Any] = []
        if comments:
            path = repo_url(repo, "issues", str(number), "comments", query={"per_page": 100})
            found = await self._gh.paginate(
                repo, path, what=f"comments of {what}", url_vars={"per_page": 100}
            )
        with reading(what):
            issue = _issue(repo, data, head, head_repo)
            return IssueDetails(issue=issue, comments=tuple(_comment(c) for c in found))

    async def get_comment(self, issue: IssueRef, comment_id: int) -> Comment:
        what = f"comment {comment_id} of {issue.repo.full_name}"
        parts = ("issues", "comments", str(comment_id))
        data = await self._git.call(issue.repo, "GET", parts, what)
        with reading(what):
            return _comment(data)

    async def create_comment(self, issue: IssueRef, body: str) -> Comment:
        what = f"a comment on #{issue.number} of {issue.repo.full_name}"
        parts = ("issues", str(issue.number), "comments")
        data = await self._git.call(issue.repo, "POST", parts, what, data={"body": body})
        with reading(what):
            return _comment(data)

    async def edit_comment(self, issue: IssueRef, comment_id: int, body: str) -> None:
        what = f"comment {comment_id} of {issue.repo.full_name}"
        parts = ("issues", "comments", str(comment_id))
        await self._git.call(issue.repo, "PATCH", parts, what, data={"body": body})

    async def add_reaction(
        self, issue: IssueRef, comment_id: int | None, reaction: str, *, line_comment: bool = False
    ) -> None:
        content = REACTION_ALIASES.get(reaction, reaction)
        if content not in REACTIONS:
            raise ValueError(f"GitHub has no reaction {reaction!r}: use one of {sorted(REACTIONS)}")
        if comment_id is None:
            parts: tuple[str, ...] = ("issues", str(issue.number), "reactions")
            what = f"a reaction on #{issue.number} of {issue.repo.full_name}"
        else:
            kind = "pulls" if line_comment else "issues"
            parts = (kind, "comments", str(comment_id), "reactions")
            what = f"a reaction on comment {comment_id} of {issue.repo.full_name}"
        await self._git.call(issue.repo, "POST", parts, what, data={"content": content})

    # --- labels and permissions ------------------------------------------------------------

    async def ensure_label(self, repo: RepoRef, name: str, *, color: str, description: str) -> None:
        what = f"label {name!r} of {repo.full_name}"
        try:
            await self._git.call(repo, "GET", ("labels", name), what)
            return
        except NotFound:
            pass
        data = {"name": name, "color": color.lstrip("#"), "description": description}
        try:
            await self._git.call(repo, "POST", ("labels",), what, data=data)
        except Conflict as refused:  # fine when someone else created it meanwhile
            try:
                await self._git.call(repo, "GET", ("labels", name), what)
            except NotFound:
                raise refused from None

    async def create_issue(
        self, repo: RepoRef, *, title: str, body: str, labels: list[str]
    ) -> IssueRef:
        what = f"a new issue in {repo.full_name}"
        data = {"title": title, "body": body, "labels": labels}
        found = await self._git.call(repo, "POST", ("issues",), what, data=data)
        with reading(what):
            return _issue(repo, found, None)

    async def add_labels(self, issue: IssueRef, labels: list[str]) -> None:
        if labels:
            what = f"labels of #{issue.number} of {issue.repo.full_name}"
            parts = ("issues", str(issue.number), "labels")
            await self._git.call(issue.repo, "POST", parts, what, data={"labels": labels})

    async def remove_label(self, issue: IssueRef, label: str) -> None:
        what = f"label {label!r} on #{issue.number} of {issue.repo.full_name}"
        try:
            await self._git.call(
                issue.repo, "DELETE", ("issues", str(issue.number), "labels", label), what
            )
        except NotFound:
            return

    async def get_permission(self, repo: RepoRef, user: str) -> Permission:
        what = f"the permission of {user} on {repo.full_name}"
        try:
            data = await self._git.call(repo, "GET", ("collaborators", user, "permission"), what)
        except NotFound:
            return Permission.NONE
        with reading(what):
            return _permission(data)

    async def clone_auth(self, repo: RepoRef) -> CloneAuth:
        """The clone URL without credentials; the token goes to git as a password only."""
        info = await self.get_repo_info(repo)
        _, token = await self._gh.credentials(repo)
        return CloneAuth(url=info.clone_url, username="x-access-token", password=token)

    async def whoami(self) -> str:
        """Check the credentials: the App's bot login (``slug[bot]``) or the token's user."""
        return await self._gh.identity()

    async def bot_account(self) -> Actor:
        """The App's bot user (``GET /users/<slug>[bot]``) or the token's user (``GET /user``)."""
        login, account = await self._gh.account()
        return Actor(login=login, id=account, is_bot=login.endswith("[bot]"))

    async def aclose(self) -> None:
        """Forget cached tokens and repository facts; the shared ``httpx.AsyncClient``
        belongs to the caller."""
        self._gh.forget()
        self.forget_repo_infos()
