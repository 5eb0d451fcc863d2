"""Review rounds on the bot's own change request. Pure.

A submitted review (GitHub) or a burst of change request notes (GitLab) becomes ONE
round once ``review.quiet_seconds`` passed without another comment (``round_due``).
The round sees every unresolved thread opened by someone the bot acts for as a
checklist item (``round_threads``), and afterwards each item gets its own reply and,
when it was addressed and ``review.resolve_threads`` is on, its resolution
(``thread_actions``). Threads of people without write access are left alone, and so
are their replies in the threads of people with it: a round's thread keeps only the
comments of writers and the bot's own (marked ``own``), the only ones its checklist
shows and the ones its last word is read from.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from bot.change_state import ReviewThread, ThreadComment
from bot.config import IsBot, ReviewSettings


def review_mark(repo_key: str, number: int, last_comment_id: int) -> str:
    """The key of one review round: the change request and the newest comment it covers
    (a second event for the same comments finds the mark and starts nothing)."""
    return f"review:{repo_key}#{number}@{last_comment_id}"


def round_due(last_activity_at: float, *, now: float, settings: ReviewSettings) -> float | None:
    """None when the round may start now; else the time to look again. Every new comment
    moves ``last_activity_at`` (the store keeps the newest), so a burst is one round."""
    due = last_activity_at + settings.quiet_seconds
    return None if now >= due else due


@dataclass(frozen=True, slots=True)
class ReviewRound:
    """``items``: the threads the round works through, oldest first. ``ignored``: open
    threads the bot does not act on, with why (for the record, never answered)."""

    items: tuple[ReviewThread, ...]
    ignored: tuple[tuple[ReviewThread, str], ...] = ()
    dropped: int = 0  # comments of people without write access left out of the items

    @property
    def empty(self) -> bool:
        return not self.items


def _folded(names: Collection[str]) -> frozenset[str]:
    return frozenset(name.lower() for name in names if name)


def _is(login: str, names: frozenset[str]) -> bool:
    return bool(login) and login.lower() in names


def by_bot(comment: ThreadComment, is_bot: IsBot) -> bool:
    return is_bot(comment.author, comment.author_id)


def _said_by_writers(
    thread: ReviewThread, writers: frozenset[str], is_bot: IsBot
) -> tuple[ReviewThread, int]:
    """``thread`` with only the comments of writers and the bot's (marked ``own``), and
    how many others were left out."""
    kept = []
    for comment in thread.comments:
        if by_bot(comment, is_bot):
            kept.append(replace(comment, own=True))
        elif _is(comment.author, writers):
            kept.append(comment)
    return replace(thread, comments=tuple(kept)), len(thread.comments) - len(kept)


def round_threads(
    threads: Sequence[ReviewThread], *, writers: Collection[str], is_bot: IsBot
) -> ReviewRound:
    """The unresolved threads to work on: opened by someone with write access (the
    caller asks the forge who has it), not by the bot, and with the last word not the
    bot's (a thread it answered waits for the reviewer). Each keeps only what writers
    and the bot said in it: a reply by someone without write access is neither an
    instruction for the round nor a new last word."""
    can_write = _folded(writers)
    items: list[ReviewThread] = []
    ignored: list[tuple[ReviewThread, str]] = []
    dropped = 0
    for thread in threads:
        if thread.resolved or not thread.comments:
            continue
        if by_bot(thread.comments[0], is_bot):
            ignored.append((thread, "opened by the bot"))
            continue
        if not _is(thread.author, can_write):
            ignored.append((thread, f"{thread.author or 'a deleted user'} has no write access"))
            continue
        kept, left_out = _said_by_writers(thread, can_write, is_bot)
        dropped += left_out
        if kept.comments and kept.comments[-1].own:
            ignored.append((kept, "answered by the bot; waiting for the reviewer"))
        else:
            items.append(kept)
    return ReviewRound(tuple(items), tuple(ignored), dropped)


@dataclass(frozen=True, slots=True)
class ThreadOutcome:
    """What the round did about one thread: ``commit`` changed it, or ``reason`` says why
    nothing did (the agent's answer, checked against its record by the caller)."""

    thread: ReviewThread
    commit: str | None = None
    reason: str = ""

    @property
    def addressed(self) -> bool:
        return self.commit is not None


@dataclass(frozen=True, slots=True)
class ThreadAction:
    thread_id: str
    reply: bool
    resolve: bool


def thread_actions(
    outcomes: Sequence[ThreadOutcome], *, settings: ReviewSettings
) -> list[ThreadAction]:
    """One reply per thread of the round; a resolution for the ones a commit addressed,
    when the setting is on and the forge lets the thread be resolved."""
    return [
        ThreadAction(
            thread_id=outcome.thread.id,
            reply=True,
            resolve=settings.resolve_threads and outcome.addressed and outcome.thread.resolvable,
        )
        for outcome in outcomes
    ]
