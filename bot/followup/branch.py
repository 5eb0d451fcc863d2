"""The bot's branch and its base: when to bring the base in, and how. Pure.

A follow-up always starts from the branch's remote head. When someone else's commit is
on the branch (a person pushed a fix), the base is merged in, never rebased onto, and
the branch is never force-pushed: their commits stay as they are. Only a branch that
holds nothing but the bot's own commits may be rebased (and then force-pushed).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from enum import StrEnum

from bot.change_state import ChangeRequestState, CommitAuthor, Mergeable


class BaseAction(StrEnum):
    NOTHING = "nothing"  # merges cleanly (or is no longer open)
    RESOLVE_CONFLICTS = "resolve_conflicts"  # a round: bring the base in, resolve, gate, push
    ASK_AGAIN = "ask_again"  # the forge has not computed mergeability yet


class Integration(StrEnum):
    MERGE = "merge"  # a merge commit; the branch's commits stay as they are
    REBASE = "rebase"  # only the bot's commits: replay them on the base (force-push own branch)


def base_action(state: ChangeRequestState) -> BaseAction:
    if state.state != "open":
        return BaseAction.NOTHING
    if state.mergeable is Mergeable.CONFLICTING:
        return BaseAction.RESOLVE_CONFLICTS
    if state.mergeable is Mergeable.UNKNOWN:
        return BaseAction.ASK_AGAIN
    return BaseAction.NOTHING


def is_bots(commit: CommitAuthor, *, logins: Collection[str], emails: Collection[str]) -> bool:
    """A commit the bot wrote: its forge account is the bot's, or (when the forge links
    no account) its author e-mail is the bot's git e-mail."""
    if commit.login:
        return commit.login.lower() in {login.lower() for login in logins}
    return bool(commit.email) and commit.email.lower() in {email.lower() for email in emails}


def others_commits(
    commits: Sequence[CommitAuthor], *, logins: Collection[str], emails: Collection[str]
) -> tuple[CommitAuthor, ...]:
    return tuple(c for c in commits if not is_bots(c, logins=logins, emails=emails))


def integration(
    commits: Sequence[CommitAuthor],
    *,
    logins: Collection[str],
    emails: Collection[str],
    complete: bool = True,
) -> Integration:
    """Merge when anyone else's commit is on the branch, or when the list may be cut
    short (``complete`` False: the forge lists the first 100): only a branch known to
    hold nothing but the bot's commits is rebased."""
    if not complete or others_commits(commits, logins=logins, emails=emails):
        return Integration.MERGE
    return Integration.REBASE


def may_force_push(
    commits: Sequence[CommitAuthor],
    *,
    logins: Collection[str],
    emails: Collection[str],
    complete: bool = True,
) -> bool:
    """Never over anyone else's commit."""
    return integration(commits, logins=logins, emails=emails, complete=complete) is (
        Integration.REBASE
    )
