"""What GitHub's answers about a pull request after it was opened mean, and the GraphQL
documents that ask for them: the state, the review threads, leaving draft, a reply, a
resolution, the answers of a review round in one document; check runs and commit
statuses as ``Check``s. Pure: ``github_followup.GitHubFollowUp`` makes the calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.change_state import (
    Annotation,
    ChangeRequestState,
    CommitAuthor,
    Mergeable,
    ReviewThread,
    ThreadAnswer,
    ThreadComment,
)
from bot.events import Check, CheckKind, RepoRef
from bot.forges.base import NotFound
from bot.forges.github_client import account_id
from bot.webhooks.check_states import github_check, github_reporter, github_status

ACTIONS_APP = "github-actions"
MAX_ANNOTATED = 5  # failed runs whose annotations are read, per commit
MAX_ANNOTATIONS = 50  # per run
MAX_THREAD_PAGES = 10  # 100 threads a page
MERGEABLE = {"MERGEABLE": Mergeable.MERGEABLE, "CONFLICTING": Mergeable.CONFLICTING}

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
# (GraphQL names a Bot by its slug: ``author_login`` writes it as REST does, ``<slug>[bot]``)
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


def owner_name(repo: RepoRef) -> dict[str, Any]:
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


def annotation(item: dict[str, Any]) -> Annotation:
    return Annotation(
        path=str(item["path"]),
        start_line=int(item.get("start_line") or 0),
        end_line=int(item.get("end_line") or item.get("start_line") or 0),
        level=str(item.get("annotation_level") or ""),
        message=str(item.get("message") or ""),
        title=str(item.get("title") or ""),
    )


def change_request_state(data: dict[str, Any]) -> ChangeRequestState:
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
        mergeable=MERGEABLE.get(str(data.get("mergeable")), Mergeable.UNKNOWN),
        draft=bool(data.get("isDraft")),
        web_url=str(data.get("url") or ""),
        commits=tuple(commits),
    )


def author_login(author: Any) -> str:
    """A comment's author as REST names it: an App's bot user as ``<slug>[bot]`` (GraphQL
    gives a Bot's bare slug, which a person may hold as a login); "" for a deleted user."""
    if not isinstance(author, dict) or not author.get("login"):
        return ""
    login = str(author["login"])
    return f"{login}[bot]" if author.get("__typename") == "Bot" else login


def thread_comment(node: dict[str, Any]) -> ThreadComment:
    return ThreadComment(
        id=int(node.get("databaseId") or 0),
        author=author_login(node.get("author")),
        author_id=account_id(node.get("author")),
        body=str(node.get("body") or ""),
        web_url=str(node.get("url") or ""),
    )


def review_thread(node: dict[str, Any]) -> ReviewThread:
    line = node.get("line") if node.get("line") is not None else node.get("originalLine")
    return ReviewThread(
        id=str(node["id"]),
        comments=tuple(thread_comment(c) for c in (node.get("comments") or {}).get("nodes") or ()),
        resolved=bool(node.get("isResolved")),
        outdated=bool(node.get("isOutdated")),
        path=node.get("path"),
        line=int(line) if line is not None else None,
    )


def pull_request(repo: RepoRef, data: Any, what: str) -> dict[str, Any]:
    pull = ((data.get("repository") or {}) if isinstance(data, dict) else {}).get("pullRequest")
    if not isinstance(pull, dict):
        raise NotFound(f"{what} not found")
    return pull
