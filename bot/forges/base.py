"""The ``Forge`` protocol: everything the bot asks of GitHub or GitLab.

Adapters (``github.py``, ``gitlab.py``) implement it over the real APIs; tests use
the one ``FakeForge`` in ``tests/fakes.py``. Errors are the typed exceptions below,
so callers never see an HTTP library's exception.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Protocol, runtime_checkable

from bot.change_state import (
    ChangeRequestState,
    CommitChecks,
    LogTail,
    OpenChangeRequest,
    ReviewThread,
    ThreadAnswer,
    ThreadComment,
)
from bot.events import Actor, ForgeKind, IssueRef, RepoRef
from bot.forges.merged import MERGED_PAGES, MergedChangeRequest

# The most of a CI job's log the bot reads by default: its end, where the failure is.
LOG_TAIL_BYTES = 64 * 1024
# Thread answers (a reply and a resolution each) sent in one GraphQL document (GitHub, GitLab).
ANSWERS_PER_REQUEST = 20


class ForgeError(Exception):
    """A forge call failed. ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(ForgeError):
    """The thing asked for does not exist (HTTP 404)."""


class AccessDenied(ForgeError):
    """The bot's credentials may not do this (HTTP 401/403 without rate limiting)."""


class RateLimited(ForgeError):
    """The forge asked us to slow down and retrying did not help in time."""

    def __init__(self, message: str, *, retry_after: float, status: int | None = 429) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after


class Conflict(ForgeError):
    """The change conflicts with the current state (HTTP 409/422), e.g. branch exists."""


class UnansweredThreads(ForgeError):
    """Some threads of a review round got no answer: ``failed`` maps each one's id to why
    (its reply, or its resolution, was refused); ``answered`` are the ones that got all
    they were to get. Raised after every thread was tried."""

    def __init__(self, failed: dict[str, str], answered: tuple[str, ...]) -> None:
        listed = "; ".join(f"{thread}: {why}" for thread, why in failed.items())
        super().__init__(f"{len(failed)} thread(s) not answered: {listed}")
        self.failed = failed
        self.answered = answered


class Permission(IntEnum):
    """A user's access to a repository, ordered so comparisons work."""

    NONE = 0
    READ = 10
    TRIAGE = 15
    WRITE = 30
    MAINTAIN = 40
    ADMIN = 50


@dataclass(frozen=True, slots=True)
class Comment:
    """``internal``: only project members may read it (a GitLab internal note; never on
    GitHub)."""

    id: int
    body: str
    author: str
    web_url: str = ""
    internal: bool = False
    author_id: str = ""  # the author's account id ("" when the forge does not say)


@dataclass(frozen=True, slots=True)
class IssueDetails:
    """``confidential``: only project members may read the issue (GitLab; never on GitHub)."""

    issue: IssueRef
    comments: tuple[Comment, ...] = ()
    confidential: bool = False

    def for_task(self, *, confidential_task: bool) -> IssueDetails:
        """What a task may read of this issue: everything when the task's own issue is
        confidential, else without the internal notes (a public task posts in public)."""
        if confidential_task:
            return self
        public = tuple(comment for comment in self.comments if not comment.internal)
        return IssueDetails(self.issue, public, self.confidential)


@dataclass(frozen=True, slots=True)
class RepoInfo:
    repo: RepoRef
    default_branch: str
    clone_url: str
    web_url: str = ""
    description: str = ""
    # GitLab: the project's own CI file path (``ci_config_path``; "" is ``.gitlab-ci.yml``)
    ci_config_path: str = ""


@dataclass(frozen=True, slots=True)
class FileContent:
    path: str
    content: bytes
    ref: str
    sha: str = ""

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


class EntryKind(StrEnum):
    FILE = "file"
    DIR = "dir"


@dataclass(frozen=True, slots=True)
class TreeEntry:
    path: str
    kind: str  # EntryKind: "file" | "dir"
    size: int | None = None


@dataclass(frozen=True, slots=True)
class SearchHit:
    path: str
    snippet: str = ""


@dataclass(frozen=True, slots=True)
class ChangeRequest:
    """A pull request (GitHub) or merge request (GitLab) the bot opened."""

    number: int
    web_url: str
    head_branch: str
    base_branch: str
    draft: bool = True


@dataclass(frozen=True, slots=True)
class CloneAuth:
    """How to clone and push: given to one git process through its environment only."""

    url: str
    username: str
    password: str = field(repr=False)


class RepoContent(Protocol):
    """A repository's content and git data: what the agent's tools read and write."""

    async def get_repo_info(self, repo: RepoRef) -> RepoInfo: ...

    async def get_file(self, repo: RepoRef, path: str, *, ref: str | None = None) -> FileContent:
        """Raises ``NotFound`` with the path when there is no such file."""
        ...

    async def list_tree(
        self, repo: RepoRef, *, path: str = "", ref: str | None = None, recursive: bool = False
    ) -> list[TreeEntry]: ...

    async def search_code(self, repo: RepoRef, query: str) -> list[SearchHit]: ...

    async def create_branch(self, repo: RepoRef, name: str, *, from_ref: str) -> None: ...

    async def commit_files(
        self,
        repo: RepoRef,
        *,
        branch: str,
        message: str,
        files: dict[str, bytes | None],
    ) -> str:
        """Commit several files at once (None deletes); returns the new commit id."""
        ...

    async def open_change_request(
        self,
        repo: RepoRef,
        *,
        head: str,
        base: str,
        title: str,
        body: str,
        draft: bool = True,
    ) -> ChangeRequest: ...

    async def update_change_request(self, repo: RepoRef, number: int, *, body: str) -> None:
        """Replace the description of the change request ``number``."""
        ...

    async def list_merged_change_requests(
        self, repo: RepoRef, *, since: str | None = None, max_pages: int = MERGED_PAGES
    ) -> list[MergedChangeRequest]:
        """The change requests merged into ``repo`` that left a merge commit (or a squashed
        one), most recently updated first, from at most ``max_pages`` pages of 100;
        ``since`` (``YYYY-MM-DD``): only those merged from that date. Read only."""
        ...


class ChangeRequestFollowUp(Protocol):
    """What the bot reads and does on its own change request after opening it: CI
    results, mergeability, review threads. Every method is one or a few requests."""

    async def get_commit_checks(self, repo: RepoRef, sha: str) -> CommitChecks:
        """Every check of commit ``sha`` (the latest report of each), with the annotations
        of the failed ones where the forge has them."""
        ...

    async def get_job_log(
        self, repo: RepoRef, log_id: str, *, max_bytes: int = LOG_TAIL_BYTES
    ) -> LogTail:
        """The last ``max_bytes`` (at most) of the log of CI job ``log_id`` (``Check.log_id``);
        raises ``NotFound`` when the job or its log is gone."""
        ...

    async def get_change_request_state(self, repo: RepoRef, number: int) -> ChangeRequestState:
        """Head, base, mergeability, draft flag and commits of change request ``number``."""
        ...

    async def list_open_change_requests(
        self, repo: RepoRef, *, branch_prefix: str
    ) -> list[OpenChangeRequest]:
        """The open change requests of ``repo`` whose head branch starts with
        ``branch_prefix`` and lives in ``repo`` itself (never a fork's)."""
        ...

    async def list_review_threads(self, repo: RepoRef, number: int) -> list[ReviewThread]:
        """Every review thread (GitHub) or discussion (GitLab) of change request ``number``,
        resolved or not, oldest first."""
        ...

    async def reply_to_thread(
        self, repo: RepoRef, number: int, thread_id: str, body: str
    ) -> ThreadComment:
        """Answer in the thread ``thread_id`` (``ReviewThread.id``)."""
        ...

    async def resolve_thread(self, repo: RepoRef, number: int, thread_id: str) -> None:
        """Mark the thread resolved; resolving a resolved thread is not an error."""
        ...

    async def answer_threads(
        self, repo: RepoRef, number: int, answers: Sequence[ThreadAnswer]
    ) -> None:
        """Reply in each thread and resolve the ones marked so, in as few requests as the
        forge allows (one GraphQL document for up to ``ANSWERS_PER_REQUEST`` answers;
        GitLab without GraphQL: a request per reply and per resolution). Raises
        ``UnansweredThreads`` naming the threads whose reply or resolution was refused,
        after trying them all."""
        ...

    async def mark_ready_for_review(self, repo: RepoRef, number: int) -> None:
        """Take change request ``number`` out of draft; one that is not a draft stays so."""
        ...


@runtime_checkable
class Forge(RepoContent, ChangeRequestFollowUp, Protocol):
    """One forge (a GitHub App / token, or a GitLab instance)."""

    kind: ForgeKind

    async def get_issue(
        self, repo: RepoRef, number: int, *, change_request: bool, comments: bool = True
    ) -> IssueDetails:
        """The issue or change request with its comments (oldest first); without
        ``comments``, none are read (one request fewer: labels and state only)."""
        ...

    async def get_comment(self, issue: IssueRef, comment_id: int) -> Comment:
        """One comment of the conversation of ``issue`` as the forge stores it now; raises
        ``NotFound`` when there is no such comment on that issue."""
        ...

    async def create_issue(
        self, repo: RepoRef, *, title: str, body: str, labels: list[str]
    ) -> IssueRef:
        """Open an issue in ``repo`` with these labels (an operator's ticket)."""
        ...

    async def create_comment(self, issue: IssueRef, body: str) -> Comment: ...

    async def edit_comment(self, issue: IssueRef, comment_id: int, body: str) -> None: ...

    async def add_reaction(
        self, issue: IssueRef, comment_id: int | None, reaction: str, *, line_comment: bool = False
    ) -> None:
        """React (``eyes``, ...) to a comment, or to the issue when ``comment_id`` is None.
        ``line_comment``: the comment is on a line of a change request's diff (GitHub keeps
        those apart from the conversation's comments)."""
        ...

    async def ensure_label(self, repo: RepoRef, name: str, *, color: str, description: str) -> None:
        """Create the label when the repository does not have it."""
        ...

    async def add_labels(self, issue: IssueRef, labels: list[str]) -> None: ...

    async def remove_label(self, issue: IssueRef, label: str) -> None:
        """Remove one label; a label that is not there is not an error."""
        ...

    async def get_permission(self, repo: RepoRef, user: str) -> Permission: ...

    async def clone_auth(self, repo: RepoRef) -> CloneAuth: ...

    async def whoami(self) -> str:
        """Check the credentials; return who the bot is on this forge (for ``bot doctor``)."""
        ...

    async def bot_account(self) -> Actor:
        """The account the bot acts as, with its id (GitHub: an App's bot user or the
        token's user; GitLab: the token's user): what recognises its own events,
        change requests and comments (``bot.config.is_bot_account``)."""
        ...

    async def aclose(self) -> None: ...


# The configured forge of a kind (None: that forge is off): what a part that talks to
# forges is handed instead of the whole runtime.
ForgeLookup = Callable[[ForgeKind], Forge | None]


@runtime_checkable
class LabelHistory(Protocol):
    """A forge that can tell who added a label (GitLab's resource label events). GitLab
    payloads are proved by a shared token only, so who added a trigger label is asked
    of the API, not taken from the payload."""

    async def label_added_by(self, issue: IssueRef, label: str) -> str | None:
        """The login of whoever last added ``label`` to the issue, or None if nobody did."""
        ...
