"""The GitHub adapter: ``bot.forges.base.Forge`` over the GitHub REST API.

Works against github.com and GitHub Enterprise Server (``api_url``), as a GitHub App
(installation tokens; the installation comes from ``RepoRef.scope_id`` or is looked
up) or with a personal token. Credentials, retries, pacing and error mapping live in
``github_auth.GitHubSession``, branches and commits (the git data API) in
``github_git.GitData``; this module only says which endpoint does what.
"""

from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx
from msgspec.structs import replace

from bot.config import GitHubSettings
from bot.events import ForgeKind, IssueRef, RepoRef
from bot.forges.base import (
    ChangeRequest,
    CloneAuth,
    Comment,
    Conflict,
    FileContent,
    ForgeError,
    IssueDetails,
    NotFound,
    Permission,
    RepoInfo,
    SearchHit,
    TreeEntry,
)
from bot.forges.github_auth import GitHubSession, reading, repo_url, split_path
from bot.forges.github_git import GitData, repo_call
from bot.forges.retry import WritePacer

_SCOPE_QUALIFIER = re.compile(r"(?i)(?<!\S)-?(repo|org|user|owner|fork|is):\S*")
TEXT_MATCH = "application/vnd.github.text-match+json"
REACTIONS = {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}
REACTION_ALIASES = {"thumbsup": "+1", "thumbsdown": "-1", "tada": "hooray"}
ROLES = {"admin": Permission.ADMIN, "maintain": Permission.MAINTAIN, "write": Permission.WRITE}
ROLES |= {"triage": Permission.TRIAGE, "read": Permission.READ, "none": Permission.NONE}


def _comment(data: dict[str, Any]) -> Comment:
    login = (data.get("user") or {}).get("login", "")
    body, url = data.get("body") or "", data.get("html_url") or ""
    return Comment(id=int(data["id"]), body=body, author=str(login), web_url=url)


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
        state="merged" if merged else str(data["state"]),
        labels=tuple(item if isinstance(item, str) else str(item["name"]) for item in labels),
        head_branch=head,
        head_repo=head_repo,
    )


def _size(item: dict[str, Any]) -> int | None:
    return int(item["size"]) if item["type"] in ("file", "blob") and "size" in item else None


def _permission(data: dict[str, Any]) -> Permission:
    role = ROLES.get(str(data.get("role_name", "")).lower())  # None for custom roles
    if role is not None:
        return role
    return ROLES.get(str(data.get("permission", "")).lower(), Permission.NONE)


class GitHubForge:
    """``Forge`` for one GitHub App or token, on github.com or GitHub Enterprise Server."""

    kind = ForgeKind.GITHUB

    def __init__(
        self,
        *,
        api_url: str,
        http: httpx.AsyncClient,
        app_id: str | None = None,
        private_key: str | None = None,
        token: str | None = None,
        user_agent: str = "coding-agent-bot",
        pacer: WritePacer | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._gh = GitHubSession(
            api_url=api_url,
            http=http,
            app_id=app_id,
            private_key=private_key,
            token=token,
            user_agent=user_agent,
            pacer=pacer or WritePacer(),
            sleep=sleep,
            clock=clock,
        )
        self._git = GitData(self._gh)

    @classmethod
    def from_settings(cls, settings: GitHubSettings, http: httpx.AsyncClient) -> GitHubForge:
        """App credentials when both app_id and the private key are set, else the token."""
        if settings.app_id and settings.private_key is not None:
            key = settings.private_key.get_secret_value()
            return cls(api_url=settings.api_url, http=http, app_id=settings.app_id, private_key=key)
        if settings.token is not None:
            token = settings.token.get_secret_value()
            return cls(api_url=settings.api_url, http=http, token=token)
        raise ValueError(
            "GitHub needs GITHUB_APP_ID with GITHUB_PRIVATE_KEY / GITHUB_PRIVATE_KEY_PATH, "
            "or GITHUB_TOKEN"
        )

    async def _call(
        self,
        repo: RepoRef,
        method: str,
        parts: tuple[str, ...],
        what: str,
        *,
        data: Any = None,
        query: Mapping[str, Any] | None = None,
    ) -> Any:
        return await repo_call(self._gh, repo, method, parts, what, data=data, query=query)

    # --- issues and comments ---------------------------------------------------------------

    async def get_issue(self, repo: RepoRef, number: int, *, change_request: bool) -> IssueDetails:
        """GitHub numbers issues and pull requests together: the issue API serves both."""
        kind = "pull request" if change_request else "issue"
        what = f"{kind} #{number} of {repo.full_name}"
        data = await self._call(repo, "GET", ("issues", str(number)), what)
        head = head_repo = None
        if isinstance(data, dict) and data.get("pull_request"):
            pull = await self._call(repo, "GET", ("pulls", str(number)), what)
            with reading(what):
                head = str(pull["head"]["ref"])
                source = pull["head"].get("repo")  # null when the fork was deleted
                head_repo = str(source["full_name"]) if source else None
        path = repo_url(repo, "issues", str(number), "comments", query={"per_page": 100})
        comments = await self._gh.paginate(
            repo, path, what=f"comments of {what}", url_vars={"per_page": 100}
        )
        with reading(what):
            issue = _issue(repo, data, head, head_repo)
            return IssueDetails(issue=issue, comments=tuple(_comment(c) for c in comments))

    async def create_comment(self, issue: IssueRef, body: str) -> Comment:
        what = f"a comment on #{issue.number} of {issue.repo.full_name}"
        parts = ("issues", str(issue.number), "comments")
        data = await self._call(issue.repo, "POST", parts, what, data={"body": body})
        with reading(what):
            return _comment(data)

    async def edit_comment(self, issue: IssueRef, comment_id: int, body: str) -> None:
        what = f"comment {comment_id} of {issue.repo.full_name}"
        parts = ("issues", "comments", str(comment_id))
        await self._call(issue.repo, "PATCH", parts, what, data={"body": body})

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
        await self._call(issue.repo, "POST", parts, what, data={"content": content})

    # --- labels and permissions ------------------------------------------------------------

    async def ensure_label(self, repo: RepoRef, name: str, *, color: str, description: str) -> None:
        what = f"label {name!r} of {repo.full_name}"
        try:
            await self._call(repo, "GET", ("labels", name), what)
            return
        except NotFound:
            pass
        data = {"name": name, "color": color.lstrip("#"), "description": description}
        try:
            await self._call(repo, "POST", ("labels",), what, data=data)
        except Conflict as refused:  # fine when someone else created it meanwhile
            try:
                await self._call(repo, "GET", ("labels", name), what)
            except NotFound:
                raise refused from None

    async def add_labels(self, issue: IssueRef, labels: list[str]) -> None:
        if labels:
            what = f"labels of #{issue.number} of {issue.repo.full_name}"
            parts = ("issues", str(issue.number), "labels")
            await self._call(issue.repo, "POST", parts, what, data={"labels": labels})

    async def remove_label(self, issue: IssueRef, label: str) -> None:
        what = f"label {label!r} on #{issue.number} of {issue.repo.full_name}"
        try:
            await self._call(
                issue.repo, "DELETE", ("issues", str(issue.number), "labels", label), what
            )
        except NotFound:
            return

    async def get_permission(self, repo: RepoRef, user: str) -> Permission:
        what = f"the permission of {user} on {repo.full_name}"
        try:
            data = await self._call(repo, "GET", ("collaborators", user, "permission"), what)
        except NotFound:
            return Permission.NONE
        with reading(what):
            return _permission(data)

    # --- repository content ----------------------------------------------------------------

    async def get_repo_info(self, repo: RepoRef) -> RepoInfo:
        what = f"repository {repo.full_name}"
        data = await self._call(repo, "GET", (), what)
        with reading(what):
            branch, web_url = str(data["default_branch"]), str(data.get("html_url") or "")
            return RepoInfo(
                repo=replace(repo, default_branch=branch, web_url=web_url or repo.web_url),
                default_branch=branch,
                clone_url=str(data["clone_url"]),
                web_url=web_url,
                description=data.get("description") or "",
            )

    async def get_file(self, repo: RepoRef, path: str, *, ref: str | None = None) -> FileContent:
        at = ref or repo.default_branch or "HEAD"
        what = f"file {path} at {at} in {repo.full_name}"
        parts = ("contents", *split_path(path))
        data = await self._call(repo, "GET", parts, what, query={"ref": ref})
        if not isinstance(data, dict) or data.get("type") != "file":
            kind = "a directory" if isinstance(data, list) else "not a regular file"
            raise ForgeError(f"{path} at {at} in {repo.full_name} is {kind}")
        with reading(what):
            sha = str(data["sha"])
            encoded = data["content"] if data.get("encoding") == "base64" else None
        if encoded is None:  # the contents API leaves out files over 1 MB: read the blob
            encoded = await self._git.value(repo, "GET", ("blobs", sha), what, "content")
        with reading(what):
            return FileContent(path=path, content=base64.b64decode(encoded), ref=at, sha=sha)

    async def list_tree(
        self, repo: RepoRef, *, path: str = "", ref: str | None = None, recursive: bool = False
    ) -> list[TreeEntry]:
        if recursive:
            return await self._walk_tree(repo, path, ref or repo.default_branch or "HEAD")
        what = f"directory {path or '/'} in {repo.full_name}"
        data = await self._call(
            repo, "GET", ("contents", *split_path(path)), what, query={"ref": ref}
        )
        kinds = {"file": "file", "symlink": "file", "dir": "dir"}
        with reading(what):
            items = data if isinstance(data, list) else [data]
            return [
                TreeEntry(item["path"], kinds[item["type"]], _size(item))
                for item in items
                if item["type"] in kinds
            ]

    async def _walk_tree(self, repo: RepoRef, path: str, ref: str) -> list[TreeEntry]:
        what = f"the tree of {ref} in {repo.full_name}"
        parts = ("git", "trees", *split_path(ref))
        data = await self._call(repo, "GET", parts, what, query={"recursive": "1"})
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        kinds = {"blob": "file", "tree": "dir"}
        with reading(what):
            return [
                TreeEntry(item["path"], kinds[item["type"]], _size(item))
                for item in data["tree"]
                if item["type"] in kinds and item["path"].startswith(prefix)
            ]

    async def search_code(self, repo: RepoRef, query: str) -> list[SearchHit]:
        if not query.strip():
            raise ValueError("search_code needs a non-empty query")
        what = f"code search {query!r} in {repo.full_name}"
        # Qualifiers naming other repositories would widen the search past this one.
        scoped = _SCOPE_QUALIFIER.sub(" ", query).strip()
        variables = {"q": f"{scoped} repo:{repo.full_name}", "per_page": 50}
        url = "/search/code{?q,per_page}"
        data = await self._gh.request(
            repo, "GET", url, what=what, url_vars=variables, accept=TEXT_MATCH
        )
        with reading(what):
            return [
                SearchHit(item["path"], next((m["fragment"] for m in item["text_matches"]), ""))
                if item.get("text_matches")
                else SearchHit(item["path"])
                for item in data["items"]
            ]

    # --- branches, commits, change requests ---------------------------------------------------

    async def create_branch(self, repo: RepoRef, name: str, *, from_ref: str) -> None:
        await self._git.create_branch(repo, name, from_ref=from_ref)

    async def commit_files(
        self, repo: RepoRef, *, branch: str, message: str, files: dict[str, bytes | None]
    ) -> str:
        """One commit through the git data API: blobs, a tree on the head's tree, the ref."""
        return await self._git.commit_files(repo, branch=branch, message=message, files=files)

    async def open_change_request(
        self, repo: RepoRef, *, head: str, base: str, title: str, body: str, draft: bool = True
    ) -> ChangeRequest:
        what = f"a pull request from {head} into {base} of {repo.full_name}"
        data = {"title": title, "head": head, "base": base, "body": body, "draft": draft}
        try:
            pull = await self._call(repo, "POST", ("pulls",), what, data=data)
        except Conflict as refused:  # drafts need a plan that has them: open a ready one
            if not draft or "draft pull requests are not supported" not in str(refused).lower():
                raise
            pull = await self._call(repo, "POST", ("pulls",), what, data={**data, "draft": False})
        with reading(what):
            return ChangeRequest(
                number=int(pull["number"]),
                web_url=str(pull["html_url"]),
                head_branch=str(pull["head"]["ref"]),
                base_branch=str(pull["base"]["ref"]),
                draft=bool(pull.get("draft", draft)),
            )

    async def clone_auth(self, repo: RepoRef) -> CloneAuth:
        """The clone URL without credentials; the token goes to git as a password only."""
        info = await self.get_repo_info(repo)
        _, token = await self._gh.credentials(repo)
        return CloneAuth(url=info.clone_url, username="x-access-token", password=token)

    async def whoami(self) -> str:
        """Check the credentials: the App's bot login (``slug[bot]``) or the token's user."""
        return await self._gh.identity()

    async def aclose(self) -> None:
        """Forget cached tokens; the shared ``httpx.AsyncClient`` belongs to the caller."""
        self._gh.forget()
