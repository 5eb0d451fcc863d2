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
    CommitAuthor,
    CommitChecks,
    LogTail,
    Mergeable,
    OpenChangeRequest,
    ReviewThread,
    ThreadAnswer,
    ThreadComment,
)
from bot.events import Check, CheckKind, CheckState, RepoRef
from bot.forges.base import ANSWERS_PER_REQUEST, LOG_TAIL_BYTES, ForgeError, NotFound
from bot.forges.github_auth import GitHubSession
from bot.forges.github_client import account_id, reading, repo_url
from bot.forges.github_git import GitData
from bot.forges.github_graphql import GraphQL, status_error
from bot.forges.log_tail import TailBuffer
from bot.webhooks.check_states import github_check, github_reporter, github_status

ACTIONS_APP = "github-actions"
MAX_ANNOTATED = 5  # failed runs whose annotations are read, per commit
MAX_ANNOTATIONS = 50  # per run
MAX_THREAD_PAGES = 10  # 100 threads a page
_MERGEABLE = {"MERGEABLE": Mergeable.MERGEABLE, "CONFLICTING": Mergeable.CONFLICTING}

STATE_QUERY = """
query($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      number url state isDraft mergeable headRefName headRefOid baseRefName
      baseRef { target { oid } }
      commits(first: 100) { nodes { commit { oid author { name email user { login } } } } }
    }
  }
}"""
# who wrote a comment: the login, and the account id of a person or an App's bot user
# (GraphQL names a Bot by its slug: ``_author`` writes it as REST does, ``<slug>[bot]``)
AUTHOR = "__typename login ...on User { databaseId } ...on Bot { databaseId }"
THREADS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $after: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved isOutdated path line originalLine
          comments(first: 50) { nodes { databaseId body url author { AUTHOR_FIELDS } } }
        }
      }
    }
  }
}""".replace("AUTHOR_FIELDS", AUTHOR)
DRAFT_QUERY = """
query($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) { pullRequest(number: $number) { id isDraft } }
}"""
REPLY = """
mutation($thread: ID!, $body: String!) {
  addPullRequestReviewThreadReply(input: {pullRequestReviewThreadId: $thread, body: $body}) {
    comment { databaseId body url author { AUTHOR_FIELDS } }
  }
}""".replace("AUTHOR_FIELDS", AUTHOR)
RESOLVE = """
mutation($thread: ID!) {
  resolveReviewThread(input: {threadId: $thread}) { thread { id isResolved } }
}"""
READY = """
mutation($id: ID!) {
  markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { isDraft } }
}"""


def answers_document(answers: Sequence[ThreadAnswer]) -> tuple[str, dict[str, Any]]:
    """One GraphQL mutation document replying in (and resolving) several threads: each
    answer is an aliased ``addPullRequestReviewThreadReply`` (``r<i>``), followed by
    ``resolveReviewThread`` (``s<i>``) when it is to be resolved. GitHub runs the fields
    of a mutation one after the other, in order."""
    params: list[str] = []
    fields: list[str] = []
    variables: dict[str, Any] = {}
    for index, answer in enumerate(answers):
        params += [f"$t{index}: ID!", f"$b{index}: String!"]
        variables[f"t{index}"], variables[f"b{index}"] = answer.thread_id, answer.body
        fields.append(
            f"r{index}: addPullRequestReviewThreadReply(input: "
            f"{{pullRequestReviewThreadId: $t{index}, body: $b{index}}}) {{ comment {{ id }} }}"
        )
        if answer.resolve:
            fields.append(
                f"s{index}: resolveReviewThread(input: {{threadId: $t{index}}}) "
                "{ thread { id isResolved } }"
            )
    text = "mutation(" + ", ".join(params) + ") {\n  " + "\n  ".join(fields) + "\n}"
    return text, variables


def _owner_name(repo: RepoRef) -> dict[str, Any]:
    owner, _, name = repo.full_name.partition("/")
    return {"owner": owner, "name": name}


def run_check(run: dict[str, Any]) -> Check:
    """A check run of the REST API as a ``Check``."""
    slug = (run.get("app") or {}).get("slug")
    output = run.get("output") or {}
    summary = "\n".join(str(part) for part in (output.get("title"), output.get("summary")) if part)
    return Check(
        name=str(run["name"]),
        state=github_check(run.get("status"), run.get("conclusion")),
        kind=CheckKind.RUN,
        conclusion=str(run.get("conclusion") or run.get("status") or ""),
        id=str(run["id"]),
        reporter=github_reporter(slug),
        web_url=str(run.get("html_url") or run.get("details_url") or ""),
        summary=summary,
        log_id=str(run["id"]) if slug == ACTIONS_APP else "",
    )


def status_checks(statuses: list[dict[str, Any]]) -> list[Check]:
    """The newest status of each context (the API lists newest first)."""
    seen: dict[str, Check] = {}
    for status in statuses:
        context = str(status["context"])
        if context in seen:
            continue
        seen[context] = Check(
            name=context,
            state=github_status(status.get("state")),
            kind=CheckKind.STATUS,
            conclusion=str(status.get("state") or ""),
            id=str(status["id"]),
            reporter=str((status.get("creator") or {}).get("login") or ""),
            web_url=str(status.get("target_url") or ""),
            summary=str(status.get("description") or ""),
        )
    return list(seen.values())


def _annotation(item: dict[str, Any]) -> Annotation:
    return Annotation(
        path=str(item["path"]),
        start_line=int(item.get("start_line") or 0),
        end_line=int(item.get("end_line") or item.get("start_line") or 0),
        level=str(item.get("annotation_level") or ""),
        message=str(item.get("message") or ""),
        title=str(item.get("title") or ""),
    )


def _state(data: dict[str, Any]) -> ChangeRequestState:
    base_target = (data.get("baseRef") or {}).get("target") or {}
    commits = []
    for node in (data.get("commits") or {}).get("nodes") or ():
        commit = node["commit"]
        author = commit.get("author") or {}
        user = author.get("user") or {}
        commits.append(
            CommitAuthor(
                sha=str(commit["oid"]),
                name=str(author.get("name") or ""),
                email=str(author.get("email") or ""),
                login=str(user.get("login") or ""),
            )
        )
    return ChangeRequestState(
        number=int(data["number"]),
        state=str(data["state"]).lower(),
        head_branch=str(data["headRefName"]),
        head_sha=str(data["headRefOid"]),
        base_branch=str(data["baseRefName"]),
        base_sha=str(base_target.get("oid") or ""),
        mergeable=_MERGEABLE.get(str(data.get("mergeable")), Mergeable.UNKNOWN),
        draft=bool(data.get("isDraft")),
        web_url=str(data.get("url") or ""),
        commits=tuple(commits),
    )


def _author(author: Any) -> str:
    """A comment's author as REST names it: an App's bot user as ``<slug>[bot]`` (GraphQL
    gives a Bot's bare slug, which a person may hold as a login); "" for a deleted user."""
    if not isinstance(author, dict) or not author.get("login"):
        return ""
    login = str(author["login"])
    return f"{login}[bot]" if author.get("__typename") == "Bot" else login


def _comment(node: dict[str, Any]) -> ThreadComment:
    return ThreadComment(
        id=int(node.get("databaseId") or 0),
        author=_author(node.get("author")),
        author_id=account_id(node.get("author")),
        body=str(node.get("body") or ""),
        web_url=str(node.get("url") or ""),
    )


def _thread(node: dict[str, Any]) -> ReviewThread:
    line = node.get("line") if node.get("line") is not None else node.get("originalLine")
    return ReviewThread(
        id=str(node["id"]),
        comments=tuple(_comment(c) for c in (node.get("comments") or {}).get("nodes") or ()),
        resolved=bool(node.get("isResolved")),
        outdated=bool(node.get("isOutdated")),
        path=node.get("path"),
        line=int(line) if line is not None else None,
    )


def _pull(repo: RepoRef, data: Any, what: str) -> dict[str, Any]:
    pull = ((data.get("repository") or {}) if isinstance(data, dict) else {}).get("pullRequest")
    if not isinstance(pull, dict):
        raise NotFound(f"{what} not found")
    return pull


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
                annotations[str(run["id"])] = tuple(_annotation(item) for item in found)
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
        variables = {**_owner_name(repo), "number": number}
        data = await self._graphql.query(repo, STATE_QUERY, variables, what=what)
        with reading(what):
            return _state(_pull(repo, data, what))

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
        variables = {**_owner_name(repo), "number": number}
        data = await self._graphql.query(repo, DRAFT_QUERY, variables, what=what)
        with reading(what):
            pull = _pull(repo, data, what)
            draft, node = bool(pull["isDraft"]), str(pull["id"])
        if draft:
            await self._graphql.mutate(repo, READY, {"id": node}, what=f"ready: {what}")

    # --- review threads ------------------------------------------------------------------------

    async def list_review_threads(self, repo: RepoRef, number: int) -> list[ReviewThread]:
        what = f"the review threads of pull request #{number} of {repo.full_name}"
        variables: dict[str, Any] = {**_owner_name(repo), "number": number, "after": None}
        threads: list[ReviewThread] = []
        for _ in range(MAX_THREAD_PAGES):
            data = await self._graphql.query(repo, THREADS_QUERY, variables, what=what)
            with reading(what):
                page = _pull(repo, data, what)["reviewThreads"]
                threads.extend(_thread(node) for node in page["nodes"] or ())
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
            return _comment(data["addPullRequestReviewThreadReply"]["comment"])

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
