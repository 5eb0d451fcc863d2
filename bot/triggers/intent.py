"""What an event could mean to the bot: its intent (``Intent``, ``IntentKind``) or the
reason it is ignored (``Ignore``), the words it asks in (``intent_text``), and the form an
inbox row keeps of it (``inbox_payload``, read back by ``stored_intent``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import msgspec

from bot.events import Command, EventKind, ForgeEvent


class IntentKind(StrEnum):
    START = "start"  # trigger label, or a mention with free text
    COMMANDS = "commands"  # one or more /agent commands
    COMMENT = "comment"  # free text: feedback if a task is active
    REVIEW = "review"  # a mention on the bot's change request: a follow-up now
    ROUND = "round"  # a review, a line comment, a thread note on it: one round after quiet
    CI = "ci"  # checks of a commit on one of the bot's branches changed
    PUSHED = "pushed"  # new commits on one of the bot's change requests


@dataclass(frozen=True, slots=True)
class Intent:
    kind: IntentKind
    event: ForgeEvent
    commands: tuple[Command, ...] = ()
    text: str = ""
    on_bot_branch: bool = False
    # A REVIEW on a change request whose author the payload does not name (GitLab gives
    # only an id): look the author up and ``refine`` before deciding.
    author_unknown: bool = False
    # What the comment says to the bot (``@bot ...``), without the mention; None: no mention.
    mention: str | None = None

    @property
    def from_label(self) -> bool:
        """A start by the trigger label (not by a comment)."""
        return self.kind is IntentKind.START and self.event.kind in (
            EventKind.ISSUE_LABELED,
            EventKind.ISSUE_OPENED,
        )


@dataclass(frozen=True, slots=True)
class Ignore:
    reason: str


INTENT_KEY = "intent"  # where an inbox row's payload keeps the intent beside the event


class _Kept(msgspec.Struct, frozen=True, omit_defaults=True):
    """What an inbox row keeps of an intent: its kind and what was read from the text
    (the event is the row's; the intent's text follows from these, ``_text``)."""

    kind: IntentKind
    commands: tuple[Command, ...] = ()
    mention: str | None = None
    on_bot_branch: bool = False
    author_unknown: bool = False


def inbox_payload(intent: Intent) -> dict[str, Any]:
    """What the inbox row of a classified delivery holds: the event, and its intent."""
    i = intent
    kept = _Kept(i.kind, i.commands, i.mention, i.on_bot_branch, i.author_unknown)
    return {**i.event.to_dict(), INTENT_KEY: msgspec.to_builtins(kept)}


def stored_intent(payload: Mapping[str, Any], event: ForgeEvent) -> Intent | None:
    """The intent an inbox row's payload keeps for its ``event`` (None: a row without one,
    from a version before it kept one). ``ValueError`` when what it keeps is not one."""
    data = payload.get(INTENT_KEY)
    if data is None:
        return None
    kept = msgspec.convert(data, _Kept)
    return Intent(
        kept.kind,
        event,
        commands=kept.commands,
        text=intent_text(kept.kind, event, kept.mention),
        on_bot_branch=kept.on_bot_branch,
        author_unknown=kept.author_unknown,
        mention=kept.mention,
    )


def intent_text(kind: IntentKind, event: ForgeEvent, mention: str | None) -> str:
    """What an intent of ``kind`` asks, in words: the mention's text, or (a review, a
    comment) the whole comment, or (review activity for a round) the whole comment,
    mention or not; nothing for a label start, commands, CI results or a push."""
    if event.kind is EventKind.RUN_REQUESTED:  # a workflow_dispatch: its instructions
        return str(event.extra.get("instructions") or "")
    body = event.comment.body.strip() if event.comment else ""
    if kind is IntentKind.ROUND:
        return body
    if kind in (IntentKind.REVIEW, IntentKind.COMMENT):
        return mention or body
    return mention or ""
