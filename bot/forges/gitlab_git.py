"""A GitLab project, its content and git data: files, trees, search, branches, commits, MRs.

``GitLabGit`` makes these python-gitlab calls for ``GitLabForge`` through one
``GitLabClient``; ``project_handle`` is the lazy project object both use. The pure
decisions (``commit_actions``, ``draft_title``) sit beside the calls that need them.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import gitlab
from gitlab.exceptions import GitlabError
from msgspec.structs import replace

from bot.events import RepoRef
from bot.forges.base import ChangeRequest, FileContent, RepoInfo, SearchHit, TreeEntry
from bot.forges.gitlab_client import GitLabClient
from bot.forges.merged import MERGED_PAGES, MergedChangeRequest, on_or_after

_DRAFT_PREFIX = "Draft: "
PAGE = 100


# --- pure decisions --------------------------------------------------------------------------


def user_id(user: object) -> str:
    """A GitLab user's id (a note's ``author``, ...); "" when none."""
    found = user.get("id") if isinstance(user, Mapping) else None
    return str(found) if isinstance(found, int) and not isinstance(found, bool) else ""


def commit_actions(files: Mapping[str, bytes | None], existing: set[str]) -> list[dict[str, str]]:
    """Commits API actions: create or update by existence; deleting an absent file is a no-op."""
    actions: list[dict[str, str]] = []
    for path, content in files.items():
        if content is None:
            if path in existing:
                actions.append({"action": "delete", "file_path": path})
            continue
        actions.append(
            {
                "action": "update" if path in existing else "create",
                "file_path": path,
                "content": base64.b64encode(content).decode("ascii"),
                "encoding": "base64",
            }
        )
    return actions


def draft_title(title: str) -> str:
    return title if title.lower().startswith(("draft:", "[draft]")) else _DRAFT_PREFIX + title


def merged_change_request(data: Mapping[str, Any]) -> MergedChangeRequest | None:
    """A merged merge request as the bot reads it: its merge commit, or the squashed commit
    when the merge made none (a fast-forward merge); None when it left neither."""
    commit = data.get("merge_commit_sha") or data.get("squash_commit_sha")
    if not commit or data.get("state") != "merged":
        return None
    return MergedChangeRequest(
        number=int(data["iid"]),
        title=str(data.get("title") or ""),
        body=str(data.get("description") or ""),
        web_url=str(data.get("web_url") or ""),
        merge_commit=str(commit),
        merged_at=str(data.get("merged_at") or ""),
    )


def project_handle(gl: gitlab.Gitlab, repo: RepoRef) -> Any:
    """The project by id when known, else by path; lazy: no request until it is used."""
    key = repo.project_id if repo.project_id is not None else repo.full_name
    return gl.projects.get(key, lazy=True)


# --- the calls -------------------------------------------------------------------------------


class GitLabGit:
    """The projects, content, branches, commits and merge requests one GitLab token reaches."""

    def __init__(self, client: GitLabClient) -> None:
        self._client = client

    def _project(self, repo: RepoRef) -> Any:
        return project_handle(self._client.gl, repo)

    # --- the project and its content -----------------------------------------------------------

    async def get_repo_info(self, repo: RepoRef) -> RepoInfo:
        def op() -> dict[str, Any]:
            key = repo.project_id if repo.project_id is not None else repo.full_name
            return dict(self._client.gl.projects.get(key).attributes)

        data = await self._client.read(f"project {repo.full_name}", op)
        default_branch = data.get("default_branch") or "main"
        web_url = data.get("web_url") or ""
        ref = replace(
            repo,
            full_name=data.get("path_with_namespace") or repo.full_name,
            project_id=int(data["id"]),
            default_branch=default_branch,
            web_url=web_url,
        )
        return RepoInfo(
            repo=ref,
            default_branch=default_branch,
            clone_url=data["http_url_to_repo"],
            web_url=web_url,
            description=data.get("description") or "",
            ci_config_path=str(data.get("ci_config_path") or ""),
        )

    async def _ref_or_default(self, repo: RepoRef, ref: str | None) -> str:
        if ref:
            return ref
        return repo.default_branch or (await self.get_repo_info(repo)).default_branch

    async def get_file(self, repo: RepoRef, path: str, *, ref: str | None = None) -> FileContent:
        """``path`` at ``ref``, or at the default branch when ``ref`` is empty."""
        branch = await self._ref_or_default(repo, ref)

        def op() -> dict[str, Any]:
            return dict(self._project(repo).files.get(file_path=path, ref=branch).attributes)

        data = await self._client.read(f"{path} at {branch} in {repo.full_name}", op)
        raw = data.get("content") or ""
        content = base64.b64decode(raw) if data.get("encoding") == "base64" else raw.encode()
        return FileContent(path=path, content=content, ref=branch, sha=data.get("blob_id") or "")

    async def list_tree(
        self, repo: RepoRef, *, path: str = "", ref: str | None = None, recursive: bool = False
    ) -> list[TreeEntry]:
        def op() -> list[dict[str, Any]]:
            project = self._project(repo)
            return list(
                project.repository_tree(path=path, ref=ref or "", recursive=recursive, get_all=True)
            )

        items = await self._client.read(f"tree {path or '/'} in {repo.full_name}", op)
        kinds = {"blob": "file", "tree": "dir"}  # "commit" entries are submodules: skipped
        return [
            TreeEntry(path=item["path"], kind=kinds[item["type"]])
            for item in items
            if item.get("type") in kinds
        ]

    async def search_code(self, repo: RepoRef, query: str) -> list[SearchHit]:
        def op() -> list[dict[str, Any]]:
            scope = gitlab.const.SearchScope.BLOBS
            return list(self._project(repo).search(scope, query, get_all=False, per_page=50))

        hits = await self._client.read(f"code search in {repo.full_name}", op)
        return [SearchHit(path=hit["path"], snippet=hit.get("data") or "") for hit in hits]

    # --- branches, commits, merge requests -----------------------------------------------------

    async def create_branch(self, repo: RepoRef, name: str, *, from_ref: str) -> None:
        def op() -> None:
            self._project(repo).branches.create({"branch": name, "ref": from_ref})

        await self._client.write(f"branch {name} in {repo.full_name}", op)

    def _existing(self, repo: RepoRef, paths: list[str], branch: str) -> set[str]:
        files = self._project(repo).files
        found = set()
        for path in paths:
            try:
                files.head(path, ref=branch)
            except GitlabError as exc:
                if exc.response_code != 404:
                    raise
            else:
                found.add(path)
        return found

    async def commit_files(
        self, repo: RepoRef, *, branch: str, message: str, files: dict[str, bytes | None]
    ) -> str:
        """One commit by the commits API; with nothing to change, the branch head."""
        where = f"branch {branch} in {repo.full_name}"
        existing = await self._client.read(where, lambda: self._existing(repo, list(files), branch))
        actions = commit_actions(files, existing)
        if not actions:  # nothing changes: the branch head is the answer
            head = await self._client.read(where, lambda: self._project(repo).branches.get(branch))
            return str(head.commit["id"])
        data = {"branch": branch, "commit_message": message, "actions": actions}
        commit = await self._client.write(where, lambda: self._project(repo).commits.create(data))
        return str(commit.id)

    async def open_change_request(
        self, repo: RepoRef, *, head: str, base: str, title: str, body: str, draft: bool = True
    ) -> ChangeRequest:
        data = {
            "source_branch": head,
            "target_branch": base,
            "title": draft_title(title) if draft else title,
            "description": body,
        }

        def op() -> dict[str, Any]:
            return dict(self._project(repo).mergerequests.create(data).attributes)

        what = f"merge request {head} -> {base} in {repo.full_name}"
        created = await self._client.write(what, op)
        return ChangeRequest(
            number=int(created["iid"]),
            web_url=created.get("web_url") or "",
            head_branch=head,
            base_branch=base,
            draft=bool(created.get("draft", draft)),
        )

    async def update_change_request(self, repo: RepoRef, number: int, *, body: str) -> None:
        def op() -> None:
            self._project(repo).mergerequests.update(number, {"description": body})

        await self._client.write(f"merge request !{number} in {repo.full_name}", op)

    async def list_merged_change_requests(
        self, repo: RepoRef, *, since: str | None = None, max_pages: int = MERGED_PAGES
    ) -> list[MergedChangeRequest]:
        """The merged merge requests, most recently updated first, one request per page of
        100 (``updated_after`` when ``since`` is given), until a page is short."""
        window = {"updated_after": f"{since}T00:00:00Z"} if since else {}
        found: list[MergedChangeRequest] = []
        for page in range(1, max_pages + 1):

            def op(page: int = page) -> list[dict[str, Any]]:
                listed = self._project(repo).mergerequests.list(
                    state="merged", order_by="updated_at", sort="desc", per_page=PAGE,
                    page=page, get_all=False, **window,
                )  # fmt: skip
                return [dict(item.attributes) for item in listed]

            what = f"the merged merge requests of {repo.full_name}"
            listed = await self._client.read(what, op)
            for data in listed:
                merged = merged_change_request(data)
                if merged is not None and on_or_after(merged.merged_at, since):
                    found.append(merged)
            if len(listed) < PAGE:
                break
        return found
