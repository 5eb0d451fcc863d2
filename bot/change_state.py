"""What a forge tells of one of the bot's change requests after it was opened. Pure data.

The forge adapters fill these in (``bot.forges.base.Forge``: the checks of a commit, a
CI job's log, the change request's mergeability and commits, its review threads, the
open change requests of the bot's branches); the after-PR decisions
(``bot.followup``) read them. Forge-neutral like ``bot.events``: a GitHub review
thread and a GitLab discussion are both a ``ReviewThread``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from bot.events import Check


class Mergeable(StrEnum):
    """Whether the change request merges into its base as it stands."""

    MERGEABLE = "mergeable"
    CONFLICTING = "conflicting"
    UNKNOWN = "unknown"  # the forge has not computed it yet (ask again later)


@dataclass(frozen=True, slots=True)
class CommitAuthor:
    """One commit of a change request's branch and who wrote it. ``login`` is the forge
    account when the forge knows it (GitHub links commits to accounts; GitLab gives
    only the name and e-mail of the commit)."""

    sha: str
    name: str = ""
    email: str = ""
    login: str = ""


@dataclass(frozen=True, slots=True)
class ChangeRequestState:
    """A change request as it stands now.

    ``base_sha`` is the base branch's head commit now (not the merge base): a failure
    that also fails there is not the change request's doing. ``commits`` are the
    branch's commits, oldest first, at most the forge's first page (100)."""

    number: int
    state: str  # open | closed | merged
    head_branch: str
    head_sha: str
    base_branch: str
    base_sha: str
    mergeable: Mergeable
    draft: bool
    web_url: str = ""
    commits: tuple[CommitAuthor, ...] = ()


@dataclass(frozen=True, slots=True)
class OpenChangeRequest:
    """One open change request from one of the bot's branches (what the poll walks)."""

    number: int
    head_branch: str
    head_sha: str
    base_branch: str
    draft: bool
    web_url: str = ""


@dataclass(frozen=True, slots=True)
class Annotation:
    """A line a check run pointed at (GitHub check annotations)."""

    path: str
    start_line: int
    end_line: int
    level: str  # notice | warning | failure
    message: str
    title: str = ""


@dataclass(frozen=True, slots=True)
class CommitChecks:
    """Every check of one commit, the latest report of each, as the forge has them now.
    ``annotations`` maps a failed check's ``id`` to what it pointed at (GitHub check
    runs; GitLab has none)."""

    sha: str
    checks: tuple[Check, ...] = ()
    annotations: dict[str, tuple[Annotation, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LogTail:
    """The end of a CI job's log: at most the bound asked for, cut at a line start.
    ``truncated``: the log was longer than what is here."""

    log_id: str
    text: str
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class ThreadComment:
    """One comment of a review thread. ``own``: the bot's own (set by ``round_threads``,
    so a round's checklist shows it as the bot's, not as a reviewer's)."""

    id: int
    author: str
    body: str
    web_url: str = ""
    own: bool = False
    author_id: str = ""  # the author's account id ("" when the forge does not say)


@dataclass(frozen=True, slots=True)
class ThreadAnswer:
    """The bot's answer in one review thread: a reply, and whether to resolve it."""

    thread_id: str
    body: str
    resolve: bool = False


@dataclass(frozen=True, slots=True)
class ReviewThread:
    """One review thread (GitHub) or discussion (GitLab) of a change request.

    ``id`` is what replying and resolving take (GitHub's thread node id; GitLab's
    discussion id). ``resolvable``: the forge lets it be resolved (a GitLab note that is
    not on the diff and not a thread may not be). ``path``/``line`` place it on the
    diff; None for a comment on the whole change request."""

    id: str
    comments: tuple[ThreadComment, ...]
    resolved: bool = False
    resolvable: bool = True
    outdated: bool = False
    path: str | None = None
    line: int | None = None

    @property
    def author(self) -> str:
        """Who opened the thread."""
        return self.comments[0].author if self.comments else ""

    @property
    def last_author(self) -> str:
        return self.comments[-1].author if self.comments else ""
