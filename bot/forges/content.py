"""The forge methods for a repository's content and git data, and for a change request
after it was opened, each passed on to one object.

Both adapters keep these operations in a module of their own (``github_git.GitData``,
``gitlab_git.GitLabGit``); ``DelegatedContent`` gives each adapter the ``Forge``
methods that hand the call to it, written once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from bot.change_state import (
    ChangeRequestState,
    CommitChecks,
    LogTail,
    OpenChangeRequest,
    ReviewThread,
    ThreadAnswer,
    ThreadComment,
)
from bot.events import RepoRef
from bot.forges.base import (
    LOG_TAIL_BYTES,
    ChangeRequest,
    ChangeRequestFollowUp,
    FileContent,
    RepoContent,
    RepoInfo,
    SearchHit,
    TreeEntry,
)
from bot.forges.merged import MERGED_PAGES, MergedChangeRequest

# Seconds a repository's facts (default branch, clone URL) are reused: a task asks for
# them several times (its context, its clone, its delivery), and they change rarely.
REPO_INFO_TTL = 300.0


class DelegatedContent:
    """Mixed into an adapter that sets ``self._git``."""

    _git: RepoContent
    _repo_clock: Callable[[], float] = time.monotonic

    async def get_repo_info(self, repo: RepoRef) -> RepoInfo:
        """The repository's facts, from the API at most once per ``REPO_INFO_TTL``."""
        cache: dict[str, tuple[float, RepoInfo]] = self.__dict__.setdefault("_repo_infos", {})
        now = self._repo_clock()
        held = cache.get(repo.key)
        if held is not None and now - held[0] < REPO_INFO_TTL:
            return held[1]
        info = await self._git.get_repo_info(repo)
        cache[repo.key] = (now, info)
        return info

    def forget_repo_infos(self) -> None:
        self.__dict__.pop("_repo_infos", None)

    async def get_file(self, repo: RepoRef, path: str, *, ref: str | None = None) -> FileContent:
        return await self._git.get_file(repo, path, ref=ref)

    async def list_tree(
        self, repo: RepoRef, *, path: str = "", ref: str | None = None, recursive: bool = False
    ) -> list[TreeEntry]:
        return await self._git.list_tree(repo, path=path, ref=ref, recursive=recursive)

    async def search_code(self, repo: RepoRef, query: str) -> list[SearchHit]:
        return await self._git.search_code(repo, query)

    async def create_branch(self, repo: RepoRef, name: str, *, from_ref: str) -> None:
        await self._git.create_branch(repo, name, from_ref=from_ref)

    async def commit_files(
        self, repo: RepoRef, *, branch: str, message: str, files: dict[str, bytes | None]
    ) -> str:
        return await self._git.commit_files(repo, branch=branch, message=message, files=files)

    async def open_change_request(
        self, repo: RepoRef, *, head: str, base: str, title: str, body: str, draft: bool = True
    ) -> ChangeRequest:
        return await self._git.open_change_request(
            repo, head=head, base=base, title=title, body=body, draft=draft
        )

    async def update_change_request(self, repo: RepoRef, number: int, *, body: str) -> None:
        await self._git.update_change_request(repo, number, body=body)

    async def list_merged_change_requests(
        self, repo: RepoRef, *, since: str | None = None, max_pages: int = MERGED_PAGES
    ) -> list[MergedChangeRequest]:
        return await self._git.list_merged_change_requests(repo, since=since, max_pages=max_pages)


class DelegatedFollowUp:
    """Mixed into an adapter that sets ``self._followup``: the after-opening calls."""

    _followup: ChangeRequestFollowUp

    async def get_commit_checks(self, repo: RepoRef, sha: str) -> CommitChecks:
        return await self._followup.get_commit_checks(repo, sha)

    async def get_job_log(
        self, repo: RepoRef, log_id: str, *, max_bytes: int = LOG_TAIL_BYTES
    ) -> LogTail:
        return await self._followup.get_job_log(repo, log_id, max_bytes=max_bytes)

    async def get_change_request_state(self, repo: RepoRef, number: int) -> ChangeRequestState:
        return await self._followup.get_change_request_state(repo, number)

    async def list_open_change_requests(
        self, repo: RepoRef, *, branch_prefix: str
    ) -> list[OpenChangeRequest]:
        return await self._followup.list_open_change_requests(repo, branch_prefix=branch_prefix)

    async def list_review_threads(self, repo: RepoRef, number: int) -> list[ReviewThread]:
        return await self._followup.list_review_threads(repo, number)

    async def reply_to_thread(
        self, repo: RepoRef, number: int, thread_id: str, body: str
    ) -> ThreadComment:
        return await self._followup.reply_to_thread(repo, number, thread_id, body)

    async def resolve_thread(self, repo: RepoRef, number: int, thread_id: str) -> None:
        await self._followup.resolve_thread(repo, number, thread_id)

    async def answer_threads(
        self, repo: RepoRef, number: int, answers: Sequence[ThreadAnswer]
    ) -> None:
        await self._followup.answer_threads(repo, number, answers)

    async def mark_ready_for_review(self, repo: RepoRef, number: int) -> None:
        await self._followup.mark_ready_for_review(repo, number)
