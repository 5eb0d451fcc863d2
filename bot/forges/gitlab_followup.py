"""A GitLab merge request after it was opened: its pipelines' jobs, job traces, state and
discussions, through python-gitlab (``GitLabClient``: a thread pool, retries, pacing).

Each ``_client.read``/``write`` is one HTTP request (a list is one page of 100), so the
figures are few: the checks of a commit are one pipelines call plus one jobs call per
pipeline kind (at most ``MAX_PIPELINES``); the state three calls; leaving draft two; a
review round's answers one GraphQL request per 20 threads (``gitlab_answers``), plus one
read of the merge request when its global id was not seen yet (listing its discussions
or reading it keeps it); a request per reply and per resolution where GraphQL is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from bot.change_state import (
    ChangeRequestState,
    CommitAuthor,
    CommitChecks,
    LogTail,
    Mergeable,
    OpenChangeRequest,
    ReviewThread,
    ThreadAnswer,
    ThreadComment,
)
from bot.events import Check, CheckKind, RepoRef
from bot.forges.base import LOG_TAIL_BYTES
from bot.forges.gitlab_answers import GitLabAnswers
from bot.forges.gitlab_client import GitLabClient
from bot.forges.gitlab_git import project_handle, user_id
from bot.forges.log_tail import TailBuffer
from bot.webhooks.check_states import gitlab_job

MAX_PIPELINES = 3  # of one commit: the newest of each source (push, merge request, external)
_EXTERNAL = "external"
_UNKNOWN_MERGE = frozenset({"unchecked", "checking", "preparing", "approvals_syncing"})
_DRAFT_PREFIX = re.compile(r"^\s*(?:\[draft\]|\(draft\)|draft:|draft\s+-)\s*", re.IGNORECASE)


# --- pure decisions --------------------------------------------------------------------------


def ready_title(title: str) -> str:
    """A draft merge request's title without the prefix that makes it a draft."""
    previous = None
    while previous != title:  # "Draft: [Draft] x" is a draft twice over
        previous, title = title, _DRAFT_PREFIX.sub("", title, count=1)
    return title


def newest_per_source(pipelines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest pipeline of each source (the API lists newest first), at most three."""
    seen: dict[str, dict[str, Any]] = {}
    for pipeline in pipelines:
        seen.setdefault(str(pipeline.get("source") or ""), pipeline)
    return list(seen.values())[:MAX_PIPELINES]


def own_pipeline(pipeline: Mapping[str, Any], repo: RepoRef) -> bool:
    """A pipeline of the project itself: its own CI configuration ran it (not external
    commit statuses, not another project's pipeline). Only these are jobs and pipelines
    to the bot (``bot.followup.ci.from_repo_ci``); the others are statuses, reported."""
    if pipeline.get("source") == _EXTERNAL:
        return False
    project = pipeline.get("project_id")
    return repo.project_id is None or project is None or int(project) == repo.project_id


def job_check(job: Mapping[str, Any], *, external: bool) -> Check:
    """``external``: a job of a pipeline that is not the project's own (``own_pipeline``)."""
    allow_failure = bool(job.get("allow_failure"))
    status = str(job.get("status") or "")
    return Check(
        name=str(job["name"]),
        state=gitlab_job(status, allow_failure=allow_failure),
        kind=CheckKind.STATUS if external else CheckKind.JOB,
        conclusion=status,
        id=str(job["id"]),
        reporter=str((job.get("user") or {}).get("username") or "") if external else "",
        web_url=str(job.get("web_url") or ""),
        summary=str(job.get("failure_reason") or "") if status == "failed" else "",
        log_id="" if external else str(job["id"]),
        optional=allow_failure,
    )


def pipeline_check(pipeline: Mapping[str, Any], *, external: bool = False) -> Check:
    """A pipeline with no jobs listed yet stands for them."""
    status = str(pipeline.get("status") or "")
    return Check(
        name=f"pipeline {pipeline['id']}",
        state=gitlab_job(status),
        kind=CheckKind.STATUS if external else CheckKind.PIPELINE,
        conclusion=status,
        id=str(pipeline["id"]),
        web_url=str(pipeline.get("web_url") or ""),
    )


def mergeable(data: Mapping[str, Any]) -> Mergeable:
    detailed = str(data.get("detailed_merge_status") or data.get("merge_status") or "")
    if data.get("has_conflicts") or detailed in ("conflict", "cannot_be_merged"):
        return Mergeable.CONFLICTING
    if detailed in _UNKNOWN_MERGE or not detailed:
        return Mergeable.UNKNOWN
    return Mergeable.MERGEABLE


def discussion_thread(data: Mapping[str, Any]) -> ReviewThread | None:
    """A discussion as a thread; None when it holds only system notes. Internal notes
    (``internal``; ``confidential`` before GitLab 15.0) are left out: a round's checklist
    and replies are public."""
    notes = [
        note
        for note in data.get("notes") or ()
        if not note.get("system") and not (note.get("internal") or note.get("confidential"))
    ]
    if not notes:
        return None
    resolvable = [note for note in notes if note.get("resolvable")]
    position = notes[0].get("position") or {}
    line = position.get("new_line") if position.get("new_line") is not None else None
    line = line if line is not None else position.get("old_line")
    return ReviewThread(
        id=str(data["id"]),
        comments=tuple(_note(note) for note in notes),
        resolved=bool(resolvable) and all(note.get("resolved") for note in resolvable),
        resolvable=bool(resolvable),
        path=position.get("new_path") or position.get("old_path"),
        line=int(line) if line is not None else None,
    )


def _note(note: Mapping[str, Any]) -> ThreadComment:
    return ThreadComment(
        id=int(note["id"]),
        author=str((note.get("author") or {}).get("username") or ""),
        author_id=user_id(note.get("author")),
        body=str(note.get("body") or ""),
    )


def _what(repo: RepoRef, number: int) -> str:
    return f"merge request !{number} in {repo.full_name}"


# --- the calls -------------------------------------------------------------------------------


class GitLabFollowUp:
    """The after-opening calls for one GitLab token."""

    def __init__(self, client: GitLabClient) -> None:
        self._client = client
        self._answers = GitLabAnswers(client.graphql, self._read_global_id, client.clock)

    async def _read_global_id(self, repo: RepoRef, number: int) -> object:
        def read() -> object:
            return self._project(repo).mergerequests.get(number).attributes.get("id")

        return await self._client.read(_what(repo, number), read)

    def _project(self, repo: RepoRef) -> Any:
        return project_handle(self._client.gl, repo)

    def _mr(self, repo: RepoRef, number: int) -> Any:
        return self._project(repo).mergerequests.get(number, lazy=True)

    async def get_commit_checks(self, repo: RepoRef, sha: str) -> CommitChecks:
        what = f"the pipelines of {sha[:12]} in {repo.full_name}"

        def pipelines() -> list[dict[str, Any]]:
            found = self._project(repo).pipelines.list(
                sha=sha, order_by="id", sort="desc", per_page=20, get_all=False
            )
            return [dict(item.attributes) for item in found]

        checks: list[Check] = []
        for pipeline in newest_per_source(await self._client.read(what, pipelines)):
            pipeline_id = int(pipeline["id"])

            def jobs(pipeline_id: int = pipeline_id) -> list[dict[str, Any]]:
                handle = self._project(repo).pipelines.get(pipeline_id, lazy=True)
                return [
                    dict(job.attributes) for job in handle.jobs.list(per_page=100, get_all=False)
                ]

            listed = await self._client.read(f"the jobs of pipeline {pipeline_id}", jobs)
            external = not own_pipeline(pipeline, repo)
            checks.extend(job_check(job, external=external) for job in listed)
            if not listed:
                checks.append(pipeline_check(pipeline, external=external))
        return CommitChecks(sha=sha, checks=tuple(checks))

    async def get_job_log(
        self, repo: RepoRef, log_id: str, *, max_bytes: int = LOG_TAIL_BYTES
    ) -> LogTail:
        """The job's trace, streamed: only its end is kept."""
        if not log_id.isdigit():
            raise ValueError(f"not a GitLab job id: {log_id!r}")

        def op() -> LogTail:
            buffer = TailBuffer(max_bytes)
            job = self._project(repo).jobs.get(int(log_id), lazy=True)
            for chunk in job.trace(iterator=True, chunk_size=64 * 1024):
                if not buffer.add(bytes(chunk)):
                    break
            return buffer.tail(log_id)

        return await self._client.read(f"the trace of job {log_id} in {repo.full_name}", op)

    async def get_change_request_state(self, repo: RepoRef, number: int) -> ChangeRequestState:
        what = _what(repo, number)

        def merge_request() -> dict[str, Any]:
            return dict(self._project(repo).mergerequests.get(number).attributes)

        data = await self._client.read(what, merge_request)
        self._answers.keep_noteable(repo, number, data.get("id"))
        base = str(data["target_branch"])

        def base_head() -> str:
            return str(self._project(repo).branches.get(base).commit["id"])

        def commits() -> list[dict[str, Any]]:
            listed = self._mr(repo, number).commits(per_page=100, get_all=False)
            return [dict(item.attributes) for item in listed]

        base_sha = await self._client.read(f"branch {base} in {repo.full_name}", base_head)
        listed = await self._client.read(f"the commits of {what}", commits)
        state = str(data.get("state") or "opened")
        return ChangeRequestState(
            number=int(data["iid"]),
            state="open" if state == "opened" else state,
            head_branch=str(data["source_branch"]),
            head_sha=str(data.get("sha") or ""),
            base_branch=base,
            base_sha=base_sha,
            mergeable=mergeable(data),
            draft=bool(data.get("draft") or data.get("work_in_progress")),
            web_url=str(data.get("web_url") or ""),
            commits=tuple(
                CommitAuthor(
                    sha=str(c["id"]),
                    name=str(c.get("author_name") or ""),
                    email=str(c.get("author_email") or ""),
                )
                for c in reversed(listed)  # the API lists newest first
            ),
        )

    async def list_open_change_requests(
        self, repo: RepoRef, *, branch_prefix: str
    ) -> list[OpenChangeRequest]:
        def op() -> list[dict[str, Any]]:
            found = self._project(repo).mergerequests.list(
                state="opened", per_page=100, get_all=True
            )
            return [dict(item.attributes) for item in found]

        found = []
        for data in await self._client.read(f"open merge requests of {repo.full_name}", op):
            same_project = data.get("source_project_id") == data.get("target_project_id")
            branch = str(data.get("source_branch") or "")
            if same_project and branch.startswith(branch_prefix):
                found.append(
                    OpenChangeRequest(
                        number=int(data["iid"]),
                        head_branch=branch,
                        head_sha=str(data.get("sha") or ""),
                        base_branch=str(data.get("target_branch") or ""),
                        draft=bool(data.get("draft") or data.get("work_in_progress")),
                        web_url=str(data.get("web_url") or ""),
                    )
                )
        return found

    async def list_review_threads(self, repo: RepoRef, number: int) -> list[ReviewThread]:
        def op() -> list[dict[str, Any]]:
            found = self._mr(repo, number).discussions.list(per_page=100, get_all=True)
            return [dict(item.attributes) for item in found]

        listed = await self._client.read(f"the discussions of {_what(repo, number)}", op)
        for data in listed:
            for note in data.get("notes") or ():
                if note.get("noteable_type") == "MergeRequest":
                    self._answers.keep_noteable(repo, number, note.get("noteable_id"))
        return [thread for data in listed if (thread := discussion_thread(data)) is not None]

    async def reply_to_thread(
        self, repo: RepoRef, number: int, thread_id: str, body: str
    ) -> ThreadComment:
        def op() -> dict[str, Any]:
            discussion = self._mr(repo, number).discussions.get(thread_id, lazy=True)
            return dict(discussion.notes.create({"body": body}).attributes)

        what = f"a reply in discussion {thread_id} of {_what(repo, number)}"
        return _note(await self._client.write(what, op))

    async def resolve_thread(self, repo: RepoRef, number: int, thread_id: str) -> None:
        def op() -> None:
            self._mr(repo, number).discussions.update(thread_id, {"resolved": True})

        await self._client.write(f"discussion {thread_id} of {_what(repo, number)}", op)

    async def answer_threads(
        self, repo: RepoRef, number: int, answers: Sequence[ThreadAnswer]
    ) -> None:
        """One GraphQL request for up to ``THREADS_PER_DOCUMENT`` answers; a note per
        reply and an update per resolution where GitLab refuses GraphQL
        (``gitlab_answers``)."""

        async def rest(answer: ThreadAnswer) -> None:
            await self.reply_to_thread(repo, number, answer.thread_id, answer.body)
            if answer.resolve:
                await self.resolve_thread(repo, number, answer.thread_id)

        await self._answers.answer(repo, number, answers, rest)

    async def mark_ready_for_review(self, repo: RepoRef, number: int) -> None:
        """GitLab keeps a merge request a draft by its title's prefix: the title loses it."""
        what = _what(repo, number)

        def read() -> dict[str, Any]:
            return dict(self._project(repo).mergerequests.get(number).attributes)

        data = await self._client.read(what, read)
        self._answers.keep_noteable(repo, number, data.get("id"))
        title = str(data.get("title") or "")
        if not (data.get("draft") or data.get("work_in_progress")) and ready_title(title) == title:
            return

        def write() -> None:
            self._project(repo).mergerequests.update(number, {"title": ready_title(title)})

        await self._client.write(what, write)
