"""ForgeEvent -> what to do. Pure functions, no I/O.

Two steps, so the dispatcher does only the look-ups a decision needs:

1. ``classify(event, settings)`` says whether an event could matter at all (a
   trigger label, a command, a mention, a comment that may be feedback, a review on
   the bot's own change request, CI results and pushes on the bot's branches) or is
   ignored (bots, our own comments, noise). The web app classifies each delivery once
   and keeps the intent beside the event in its inbox row (``inbox_payload``); the
   dispatcher reads it back (``stored_intent``). When a look-up tells more about the
   event (the change request's author or head branch, GitLab's labels and state as
   stored), ``refine`` decides again only what those facts decide, from the commands
   and mention the text was read for once.
2. ``decide(intent, ...)`` turns it into actions, given the actor's permission and
   the issue's active / latest task.

The code lives in one module per job: ``intent`` (the intent and its inbox form),
``classification`` (``classify``, ``refine``), ``actions`` (the actions and replies) and
``decisions`` (``decide``). Import from ``bot.triggers``.
"""

from __future__ import annotations

from bot.triggers.actions import (
    WAITING_STATES,
    Action,
    ActionKind,
    CreateTask,
    React,
    Reply,
    ReplyKind,
    ScheduleRound,
    SendMessage,
    SetAutofix,
    ShowStatus,
)
from bot.triggers.classification import (
    COMMENT_KINDS,
    FEEDBACK_REVIEW_STATES,
    MARKER_PREFIX,
    classify,
    is_own_or_bot,
    owns_change_request,
    refine,
)
from bot.triggers.decisions import (
    decide,
    may_steer,
    needs_permission,
    note_unused,
)
from bot.triggers.intent import (
    INTENT_KEY,
    Ignore,
    Intent,
    IntentKind,
    inbox_payload,
    intent_text,
    stored_intent,
)

__all__ = [
    "COMMENT_KINDS",
    "FEEDBACK_REVIEW_STATES",
    "INTENT_KEY",
    "MARKER_PREFIX",
    "WAITING_STATES",
    "Action",
    "ActionKind",
    "CreateTask",
    "Ignore",
    "Intent",
    "IntentKind",
    "React",
    "Reply",
    "ReplyKind",
    "ScheduleRound",
    "SendMessage",
    "SetAutofix",
    "ShowStatus",
    "classify",
    "decide",
    "inbox_payload",
    "intent_text",
    "is_own_or_bot",
    "may_steer",
    "needs_permission",
    "note_unused",
    "owns_change_request",
    "refine",
    "stored_intent",
]
