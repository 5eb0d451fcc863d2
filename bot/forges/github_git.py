"""A GitHub repository, its content and git data: files, trees, search, branches, commits, PRs.

``GitData`` makes these REST calls for ``GitHubForge`` through one ``GitHubSession``:
the contents and code-search APIs for reads, the git data API (blobs, trees, commits,
refs) for branches and multi-file commits. ``repo_call`` is the repository-scoped
request both modules use.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from msgspec.structs import replace

from bot.events import RepoRef
from bot.forges.base import (
    ChangeRequest,
    Conflict,
    FileContent,
    ForgeError,
    RepoInfo,
    SearchHit,
    TreeEntry,
)
from bot.forges.github_auth import GitHubSession
from bot.forges.github_client import reading, repo_url, split_path
from bot.forges.merged import MERGED_PAGES, MergedChangeRequest, on_or_after

_SHA = re.compile(r"^[0-9a-f]{40}$")
_SCOPE_QUALIFIER = re.compile(r"(?i)(?<!\S)-?(repo|org|user|owner|fork|is):\S*")
TEXT_MATCH = "application/vnd.github.text-match+json"
PAGE = 100


async def repo_call(
    gh: GitHubSession,
    repo: RepoRef,
    method: str,
    parts: tuple[str, ...],
    what: str,
    *,
    data: Any = None,
    query: Mapping[str, Any] | None = None,
) -> Any:
    """One request to ``/repos/{owner}/{repo}/<parts>`` about ``what``."""
    url = repo_url(repo, *parts, query=query)
    return await gh.request(repo, method, url, what=what, data=data, url_vars=query)


def _merged(pull: dict[str, Any]) -> MergedChangeRequest:
    return MergedChangeRequest(
        number=int(pull["number"]),
        title=str(pull["title"]),
        body=pull.get("body") or "",
        web_url=str(pull.get("html_url") or ""),
        merge_commit=str(pull["merge_commit_sha"]),
        merged_at=str(pull["merged_at"]),
    )


def _size(item: dict[str, Any]) -> int | None:
    return int(item["size"]) if item["type"] in ("file", "blob") and "size" in item else None


class GitData:
    """The repositories, content, branches, commits and pull requests one App or token reaches."""

    def __init__(self, gh: GitHubSession) -> None:
        self._gh = gh

    async def call(
        self,
        repo: RepoRef,
        method: str,
        parts: tuple[str, ...],
        what: str,
        *,
        data: Any = None,
        query: Mapping[str, Any] | None = None,
    ) -> Any:
        """One request to ``/repos/{owner}/{repo}/<parts>`` about ``what``."""
        return await repo_call(self._gh, repo, method, parts, what, data=data, query=query)

    # --- the repository and its content --------------------------------------------------------

    async def get_repo_info(self, repo: RepoRef) -> RepoInfo:
        what = f"repository {repo.full_name}"
        data = await self.call(repo, "GET", (), what)
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
        data = await self.call(repo, "GET", parts, what, query={"ref": ref})
        if not isinstance(data, dict) or data.get("type") != "file":
            kind = "a directory" if isinstance(data, list) else "not a regular file"
            raise ForgeError(f"{path} at {at} in {repo.full_name} is {kind}")
        with reading(what):
            sha = str(data["sha"])
            encoded = data["content"] if data.get("encoding") == "base64" else None
        if encoded is None:  # the contents API leaves out files over 1 MB: read the blob
            encoded = await self.value(repo, "GET", ("blobs", sha), what, "content")
        with reading(what):
            return FileContent(path=path, content=base64.b64decode(encoded), ref=at, sha=sha)

    async def list_tree(
        self, repo: RepoRef, *, path: str = "", ref: str | None = None, recursive: bool = False
    ) -> list[TreeEntry]:
        if recursive:
            return await self._walk_tree(repo, path, ref or repo.default_branch or "HEAD")
        what = f"directory {path or '/'} in {repo.full_name}"
        data = await self.call(
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
        data = await self.call(repo, "GET", parts, what, query={"recursive": "1"})
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

    # --- branches, commits, pull requests ------------------------------------------------------

    async def branch_sha(self, repo: RepoRef, branch: str) -> str:
        if _SHA.match(branch):
            return branch
        what = f"branch {branch} of {repo.full_name}"
        parts = ("git", "ref", "heads", *split_path(branch))
        data = await self.call(repo, "GET", parts, what)
        with reading(what):
            return str(data["object"]["sha"])

    async def create_branch(self, repo: RepoRef, name: str, *, from_ref: str) -> None:
        sha = await self.branch_sha(repo, from_ref)
        data = {"ref": f"refs/heads/{name}", "sha": sha}
        what = f"branch {name} of {repo.full_name}"
        await self.call(repo, "POST", ("git", "refs"), what, data=data)

    async def commit_files(
        self, repo: RepoRef, *, branch: str, message: str, files: dict[str, bytes | None]
    ) -> str:
        """One commit through the git data API: blobs, a tree on the head's tree, the ref."""
        if not files:
            raise ValueError("commit_files needs at least one file to change")
        head = await self.branch_sha(repo, branch)
        what = f"a commit on {branch} of {repo.full_name}"
        base = await self.value(repo, "GET", ("commits", head), what, "tree", "sha")
        tree = [await self._tree_entry(repo, path, data, what) for path, data in files.items()]
        new_tree = await self.value(
            repo, "POST", ("trees",), what, data={"base_tree": base, "tree": tree}
        )
        commit_data = {"message": message, "tree": new_tree, "parents": [head]}
        commit = await self.value(repo, "POST", ("commits",), what, data=commit_data)
        ref = ("refs", "heads", *split_path(branch))
        await self.value(
            repo, "PATCH", ref, what, "object", "sha", data={"sha": commit, "force": False}
        )
        return commit

    async def open_change_request(
        self, repo: RepoRef, *, head: str, base: str, title: str, body: str, draft: bool = True
    ) -> ChangeRequest:
        what = f"a pull request from {head} into {base} of {repo.full_name}"
        data = {"title": title, "head": head, "base": base, "body": body, "draft": draft}
        try:
            pull = await self.call(repo, "POST", ("pulls",), what, data=data)
        except Conflict as refused:  # drafts need a plan that has them: open a ready one
            if not draft or "draft pull requests are not supported" not in str(refused).lower():
                raise
            pull = await self.call(repo, "POST", ("pulls",), what, data={**data, "draft": False})
        with reading(what):
            return ChangeRequest(
                number=int(pull["number"]),
                web_url=str(pull["html_url"]),
                head_branch=str(pull["head"]["ref"]),
                base_branch=str(pull["base"]["ref"]),
                draft=bool(pull.get("draft", draft)),
            )

    async def update_change_request(self, repo: RepoRef, number: int, *, body: str) -> None:
        what = f"pull request {number} of {repo.full_name}"
        await self.call(repo, "PATCH", ("pulls", str(number)), what, data={"body": body})

    async def list_merged_change_requests(
        self, repo: RepoRef, *, since: str | None = None, max_pages: int = MERGED_PAGES
    ) -> list[MergedChangeRequest]:
        """The closed pull requests, most recently updated first, page by page: those with
        ``merged_at`` and ``merge_commit_sha``; a page short of 100, or one whose last pull
        request was updated before ``since``, is the last read."""
        what = f"the merged pull requests of {repo.full_name}"
        found: list[MergedChangeRequest] = []
        for page in range(1, max_pages + 1):
            query = {"state": "closed", "sort": "updated", "direction": "desc"}
            pulls = await self.call(
                repo, "GET", ("pulls",), what, query=query | {"per_page": PAGE, "page": page}
            )
            with reading(what):
                found.extend(
                    _merged(pull) for pull in pulls
                    if pull.get("merged_at") and pull.get("merge_commit_sha")
                    and on_or_after(str(pull["merged_at"]), since)
                )  # fmt: skip
                if len(pulls) < PAGE or not on_or_after(str(pulls[-1]["updated_at"]), since):
                    break
        return found

    async def value(
        self,
        repo: RepoRef,
        method: str,
        parts: tuple[str, ...],
        what: str,
        *keys: str,
        data: Any = None,
    ) -> str:
        """A git data API call; returns the object's ``sha`` (or the value at ``keys``)."""
        node = await self.call(repo, method, ("git", *parts), what, data=data)
        with reading(what):
            for key in keys or ("sha",):
                node = node[key]
            return str(node)

    async def _tree_entry(
        self, repo: RepoRef, path: str, content: bytes | None, what: str
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {"path": "/".join(split_path(path)), "mode": "100644"}
        entry |= {"type": "blob", "sha": None}  # no blob: the path is deleted
        if content is not None:
            blob = {"content": base64.b64encode(content).decode("ascii"), "encoding": "base64"}
            entry["sha"] = await self.value(repo, "POST", ("blobs",), what, data=blob)
        return entry
