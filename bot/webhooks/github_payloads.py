"""The parts of GitHub's webhook payloads the bot reads, as msgspec structs.

Only these fields are decoded (and type-checked); everything else in a payload is
skipped (see ``bot.webhooks.decode``). A field typed ``X | None = None`` may be
missing or null; any other field is required.
"""

from __future__ import annotations

from bot.webhooks.decode import Part as _Part


class User(_Part):
    login: str
    id: int
    type: str | None = None


class Login(_Part):
    login: str
    id: int | None = None  # the account's id (every payload of GitHub's has it)


class Named(_Part):
    name: str


class FullName(_Part):
    full_name: str


class Present(_Part):
    """A key whose presence is all that matters (``issue.pull_request``)."""


class Installation(_Part):
    id: int
    account: Login | None = None


class Repository(_Part):
    full_name: str
    default_branch: str | None = None
    html_url: str | None = None


class Head(_Part):
    ref: str
    repo: FullName | None = None  # null when the fork was deleted
    sha: str | None = None


class Issue(_Part):
    """An issue, or a pull request as ``issue`` / ``pull_request`` carries it."""

    number: int
    title: str
    user: Login
    body: str | None = None
    html_url: str | None = None
    state: str | None = None
    labels: list[Named] | None = None
    pull_request: Present | None = None
    merged: bool | None = None
    head: Head | None = None
    base: Head | None = None
    draft: bool | None = None


class Comment(_Part):
    """An issue comment, a review, or a review comment."""

    id: int
    user: Login
    body: str | None = None
    html_url: str | None = None
    state: str | None = None
    path: str | None = None
    line: int | None = None
    commit_id: str | None = None
    pull_request_review_id: int | None = None
    in_reply_to_id: int | None = None


class _Event(_Part, kw_only=True):
    """What every handled event carries: where, who, and the installation."""

    repository: Repository
    sender: User
    action: str | None = None
    installation: Installation | None = None


class IssuesEvent(_Event, kw_only=True):
    issue: Issue
    label: Named | None = None


class IssueCommentEvent(_Event, kw_only=True):
    issue: Issue
    comment: Comment


class PullRequestEvent(_Event, kw_only=True):
    pull_request: Issue
    label: Named | None = None
    before: str | None = None  # synchronize: the head before the push


class ReviewEvent(_Event, kw_only=True):
    pull_request: Issue
    review: Comment


class ReviewCommentEvent(_Event, kw_only=True):
    pull_request: Issue
    comment: Comment


# --- CI: check suites and runs, workflow runs, commit statuses -----------------------------


class App(_Part):
    slug: str | None = None


class Number(_Part):
    number: int


class CheckOutput(_Part):
    title: str | None = None
    summary: str | None = None


class SuiteBrief(_Part):
    head_branch: str | None = None


class CheckSuite(_Part):
    id: int
    head_sha: str
    head_branch: str | None = None
    status: str | None = None
    conclusion: str | None = None
    app: App | None = None
    pull_requests: list[Number] | None = None


class CheckRun(_Part):
    id: int
    name: str
    head_sha: str
    status: str
    conclusion: str | None = None
    html_url: str | None = None
    details_url: str | None = None
    output: CheckOutput | None = None
    app: App | None = None
    pull_requests: list[Number] | None = None
    check_suite: SuiteBrief | None = None


class WorkflowRun(_Part):
    id: int
    head_sha: str
    name: str | None = None
    head_branch: str | None = None
    status: str | None = None
    conclusion: str | None = None
    html_url: str | None = None
    pull_requests: list[Number] | None = None


class CheckSuiteEvent(_Event, kw_only=True):
    check_suite: CheckSuite


class CheckRunEvent(_Event, kw_only=True):
    check_run: CheckRun


class WorkflowRunEvent(_Event, kw_only=True):
    workflow_run: WorkflowRun


class StatusEvent(_Event, kw_only=True):
    """A commit status; it has no ``action``: its ``state`` says what happened."""

    id: int
    sha: str
    context: str
    state: str
    description: str | None = None
    target_url: str | None = None
    branches: list[Named] | None = None


class InstallationEvent(_Part):
    installation: Installation
    sender: User
    action: str | None = None
    repositories: list[FullName] | None = None
    repositories_added: list[FullName] | None = None
    repositories_removed: list[FullName] | None = None


class PingEvent(_Part):
    sender: User
    action: str | None = None
    hook_id: int | None = None
    zen: str | None = None
    repository: Repository | None = None
    installation: Installation | None = None


class Loose(_Part):
    """Any other event: who and where when the payload says so, checked afterwards."""

    action: object = None
    sender: object = None
    repository: object = None
    installation: object = None
