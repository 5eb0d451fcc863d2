"""GitHub's git data API: branch heads, blobs, trees, commits and refs.

``GitData`` makes branches and multi-file commits for ``GitHubForge`` through one
``GitHubSession``; ``repo_call`` is the repository-scoped request both use.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from bot.events import RepoRef
from bot.forges.github_auth import GitHubSession, reading, repo_url, split_path

_SHA = re.compile(r"^[0-9a-f]{40}$")


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


class GitData:
    """Branches and commits of one GitHub App or token, by the git data API."""

    def __init__(self, gh: GitHubSession) -> None:
        self._gh = gh

    async def branch_sha(self, repo: RepoRef, branch: str) -> str:
        if _SHA.match(branch):
            return branch
        what = f"branch {branch} of {repo.full_name}"
        parts = ("git", "ref", "heads", *split_path(branch))
        data = await repo_call(self._gh, repo, "GET", parts, what)
        with reading(what):
            return str(data["object"]["sha"])

    async def create_branch(self, repo: RepoRef, name: str, *, from_ref: str) -> None:
        sha = await self.branch_sha(repo, from_ref)
        data = {"ref": f"refs/heads/{name}", "sha": sha}
        what = f"branch {name} of {repo.full_name}"
        await repo_call(self._gh, repo, "POST", ("git", "refs"), what, data=data)

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
        node = await repo_call(self._gh, repo, method, ("git", *parts), what, data=data)
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
