"""A GitHub pull request after it was opened: its checks, job logs, state and review threads.

``GitHubFollowUp`` serves ``bot.forges.base.ChangeRequestFollowUp`` for ``GitHubForge``
in as few requests as it can: the checks of a commit are two REST calls (check runs,
commit statuses) plus one per failed run that has annotations (at most
``MAX_ANNOTATED``); a job's log is the REST redirect plus the download of its end; the
state, the threads, a reply, a resolution are one GraphQL call each (the answers of a review
round, replies and resolutions, go in one GraphQL document for up to ``ANSWERS_PER_REQUEST``
threads); leaving draft is two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from bot.change_state import (
    Annotation,
    ChangeRequestState,
    CommitChecks,
    LogTail,
    OpenChangeRequest,
    ReviewThread,
    ThreadAnswer,
    ThreadComment,
)
from bot.events import CheckState, RepoRef
from bot.forges.base import ANSWERS_PER_REQUEST, LOG_TAIL_BYTES, ForgeError, NotFound
from bot.forges.github_auth import GitHubSession
from bot.forges.github_client import reading, repo_url
from bot.forges.github_followup_wire import (
    DRAFT_QUERY,
    MAX_ANNOTATED,
    MAX_ANNOTATIONS,
    MAX_THREAD_PAGES,
    READY,
    REPLY,
    RESOLVE,
    STATE_QUERY,
    THREADS_QUERY,
    annotation,
    answers_document,
    change_request_state,
    owner_name,
    pull_request,
    review_thread,
    run_check,
    status_checks,
    thread_comment,
)
from bot.forges.github_git import GitData
from bot.forges.github_graphql import GraphQL, status_error
from bot.forges.log_tail import TailBuffer


class GitHubFollowUp:
    """The after-opening calls for one App or token."""

    def __init__(self, gh: GitHubSession, git: GitData) -> None:
        self._gh = gh
        self._git = git
        self._graphql = GraphQL(gh)

    # --- checks and logs ---------------------------------------------------------------------

    async def get_commit_checks(self, repo: RepoRef, sha: str) -> CommitChecks:
        what = f"the checks of {sha[:12]} in {repo.full_name}"
        runs = await self._git.call(
            repo, "GET", ("commits", sha, "check-runs"), what,
            query={"filter": "latest", "per_page": 100},
        )  # fmt: skip
        statuses = await self._git.call(
            repo, "GET", ("commits", sha, "statuses"), what, query={"per_page": 100}
        )
        with reading(what):
            run_items = list(runs["check_runs"])
            checks = [run_check(run) for run in run_items] + status_checks(list(statuses))
        annotated = [
            run
            for run, check in zip(run_items, checks, strict=False)
            if check.state is CheckState.FAILED
            and int((run.get("output") or {}).get("annotations_count") or 0) > 0
        ][:MAX_ANNOTATED]
        annotations: dict[str, tuple[Annotation, ...]] = {}
        for run in annotated:
            found = await self._git.call(
                repo, "GET", ("check-runs", str(run["id"]), "annotations"), what,
                query={"per_page": MAX_ANNOTATIONS},
            )  # fmt: skip
            with reading(what):
                annotations[str(run["id"])] = tuple(annotation(item) for item in found)
        return CommitChecks(sha=sha, checks=tuple(checks), annotations=annotations)

    async def get_job_log(
        self, repo: RepoRef, log_id: str, *, max_bytes: int = LOG_TAIL_BYTES
    ) -> LogTail:
        """GitHub answers with a redirect to a short-lived download URL; only the end of
        the log is asked of it (a ``Range`` request), and read no further than needed."""
        if not log_id.isdigit():
            raise ValueError(f"not a GitHub Actions job id: {log_id!r}")
        what = f"the log of job {log_id} in {repo.full_name}"
        path = repo_url(repo, "actions", "jobs", log_id, "logs")
        status, headers, body = await self._gh.raw(repo, "GET", self._gh.api_url + path)
        if status == 200:  # some servers answer with the log itself
            return TailBuffer.of(body, max_bytes).tail(log_id)
        location = {k.lower(): v for k, v in headers.items()}.get("location")
        if status not in (301, 302, 303, 307, 308) or not location:
            if status == 410:
                raise NotFound(f"{what} not found (expired)", status=410)
            now = self._gh.clock()
            raise status_error(status, headers, body, method="GET", path=path, what=what, now=now)
        return await self._download_tail(location, log_id, max_bytes, what)

    async def _download_tail(self, url: str, log_id: str, max_bytes: int, what: str) -> LogTail:
        """The end of the log at ``url``: no credentials go there (the URL is signed)."""
        if not url.startswith(("https://", "http://")):
            raise ForgeError(f"GitHub redirected {what} to an unusable address")
        buffer = TailBuffer(max_bytes)
        try:
            async with self._gh.http.stream(
                "GET", url, headers={"range": f"bytes=-{max_bytes}"}
            ) as response:
                if response.status_code == 416:  # an empty log has no last bytes
                    return LogTail(log_id=log_id, text="")
                if response.status_code not in (200, 206):
                    raise ForgeError(f"{what}: download answered {response.status_code}",
                                     status=response.status_code)  # fmt: skip
                buffer.partial = response.status_code == 206 and _longer(response, max_bytes)
                async for chunk in response.aiter_bytes():
                    if not buffer.add(chunk):
                        break
        except httpx.HTTPError as exc:
            raise ForgeError(f"{what}: download failed: {type(exc).__name__}") from exc
        return buffer.tail(log_id)

    # --- the pull request ----------------------------------------------------------------------

    async def get_change_request_state(self, repo: RepoRef, number: int) -> ChangeRequestState:
        what = f"pull request #{number} of {repo.full_name}"
        variables = {**owner_name(repo), "number": number}
        data = await self._graphql.query(repo, STATE_QUERY, variables, what=what)
        with reading(what):
            return change_request_state(pull_request(repo, data, what))

    async def list_open_change_requests(
        self, repo: RepoRef, *, branch_prefix: str
    ) -> list[OpenChangeRequest]:
        what = f"the open pull requests of {repo.full_name}"
        query = {"state": "open", "per_page": 100}
        pulls = await self._gh.paginate(
            repo, repo_url(repo, "pulls", query=query), what=what, url_vars=query
        )
        found = []
        with reading(what):
            for pull in pulls:
                head = pull["head"]
                source = (head.get("repo") or {}).get("full_name")
                if source != repo.full_name or not str(head["ref"]).startswith(branch_prefix):
                    continue
                found.append(
                    OpenChangeRequest(
                        number=int(pull["number"]),
                        head_branch=str(head["ref"]),
                        head_sha=str(head["sha"]),
                        base_branch=str(pull["base"]["ref"]),
                        draft=bool(pull.get("draft")),
                        web_url=str(pull.get("html_url") or ""),
                    )
                )
        return found

    async def mark_ready_for_review(self, repo: RepoRef, number: int) -> None:
        what = f"pull request #{number} of {repo.full_name}"
        variables = {**owner_name(repo), "number": number}
        data = await self._graphql.query(repo, DRAFT_QUERY, variables, what=what)
        with reading(what):
            pull = pull_request(repo, data, what)
            draft, node = bool(pull["isDraft"]), str(pull["id"])
        if draft:
            await self._graphql.mutate(repo, READY, {"id": node}, what=f"ready: {what}")

    # --- review threads ------------------------------------------------------------------------

    async def list_review_threads(self, repo: RepoRef, number: int) -> list[ReviewThread]:
        what = f"the review threads of pull request #{number} of {repo.full_name}"
        variables: dict[str, Any] = {**owner_name(repo), "number": number, "after": None}
        threads: list[ReviewThread] = []
        for _ in range(MAX_THREAD_PAGES):
            data = await self._graphql.query(repo, THREADS_QUERY, variables, what=what)
            with reading(what):
                page = pull_request(repo, data, what)["reviewThreads"]
                threads.extend(review_thread(node) for node in page["nodes"] or ())
                info = page["pageInfo"]
            if not info.get("hasNextPage"):
                break
            variables["after"] = info.get("endCursor")
        return threads

    async def reply_to_thread(
        self, repo: RepoRef, number: int, thread_id: str, body: str
    ) -> ThreadComment:
        what = f"a reply in thread {thread_id} of pull request #{number} of {repo.full_name}"
        data = await self._graphql.mutate(
            repo, REPLY, {"thread": thread_id, "body": body}, what=what
        )
        with reading(what):
            return thread_comment(data["addPullRequestReviewThreadReply"]["comment"])

    async def resolve_thread(self, repo: RepoRef, number: int, thread_id: str) -> None:
        what = f"thread {thread_id} of pull request #{number} of {repo.full_name}"
        await self._graphql.mutate(repo, RESOLVE, {"thread": thread_id}, what=what)

    async def answer_threads(
        self, repo: RepoRef, number: int, answers: Sequence[ThreadAnswer]
    ) -> None:
        what = f"answers in {{}} threads of pull request #{number} of {repo.full_name}"
        for start in range(0, len(answers), ANSWERS_PER_REQUEST):
            chunk = answers[start : start + ANSWERS_PER_REQUEST]
            text, variables = answers_document(chunk)
            await self._graphql.mutate(repo, text, variables, what=what.format(len(chunk)))


def _longer(response: httpx.Response, max_bytes: int) -> bool:
    """Whether a partial answer's ``Content-Range: bytes a-b/total`` has more before it."""
    total = response.headers.get("content-range", "").rpartition("/")[2]
    return not total.isdigit() or int(total) > max_bytes
