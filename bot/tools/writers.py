"""Whose comments a round may read: the people with write access, and the bot itself.

A round on the bot's change request runs with no person watching (a CI failure, a review,
a conflict started it), so what anyone without write access wrote stays out of its
prompt: out of the briefing (``bot.agent.briefing``) and out of what its ``get_issue``
tool reads (``bot.tools.forge_tools``). ``writers_of`` asks the forge, newest author
first, about at most ``MAX_AUTHOR_LOOKUPS`` of them; an author over that bound, or whose
look-up fails, counts as without access.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.config import IsBot
from bot.events import RepoRef
from bot.forges.base import Comment, Forge, ForgeError, Permission

MAX_AUTHOR_LOOKUPS = 10


async def writers_of(
    forge: Forge,
    repo: RepoRef,
    comments: Sequence[Comment],
    *,
    is_bot: IsBot,
    lookups: int = MAX_AUTHOR_LOOKUPS,
) -> frozenset[str]:
    """The authors of ``comments`` (lower case) with write access, asked newest first;
    the bot's own account is never asked (it is not a person)."""
    asked: dict[str, bool] = {}
    for comment in reversed(comments):
        author = comment.author.lower()
        if not author or author in asked or is_bot(comment.author, comment.author_id):
            continue
        if len(asked) >= lookups:
            break
        try:
            permission = await forge.get_permission(repo, comment.author)
        except ForgeError:
            permission = Permission.NONE
        asked[author] = permission >= Permission.WRITE
    return frozenset(author for author, can in asked.items() if can)


async def said_by_writers(
    forge: Forge, repo: RepoRef, comments: Sequence[Comment], *, is_bot: IsBot
) -> tuple[Comment, ...]:
    """``comments`` without those of people who lack write access (the bot's kept)."""
    writers = await writers_of(forge, repo, comments, is_bot=is_bot)
    return tuple(
        c for c in comments if is_bot(c.author, c.author_id) or c.author.lower() in writers
    )
