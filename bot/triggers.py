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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

import msgspec

from bot.config import Settings, bot_account, bot_names, is_bot_account
from bot.events import (
    Command,
    CommandName,
    EventKind,
    ForgeEvent,
    IssueRef,
    MessageKind,
    TaskMode,
    TaskRequest,
)
from bot.followup.ci import autofix_switch
from bot.forges.base import Permission
from bot.storage.base import Task, TaskState
from bot.webhooks.commands import mention_text, parse_commands

MARKER_PREFIX = "<!-- coding-agent:"
# Review states (GitHub's ``review.state``) that ask for changes; an approval does not.
FEEDBACK_REVIEW_STATES = frozenset({"changes_requested", "commented"})


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
        text=_text(kept.kind, event, kept.mention),
        on_bot_branch=kept.on_bot_branch,
        author_unknown=kept.author_unknown,
        mention=kept.mention,
    )


class ActionKind(StrEnum):
    CREATE_TASK = "create_task"
    MESSAGE = "message"  # a message for the active task (feedback or command)
    REPLY = "reply"  # a short comment (``text`` names its template) quoting what it answers
    STATUS = "status"  # reply with the task's status
    REACT = "react"
    ROUND = "round"  # collect review activity on the bot's change request into one round
    AUTOFIX = "autofix"  # switch the CI fix rounds of the bot's change request


class ReplyKind(StrEnum):
    """The short replies (each a template of ``bot/comments/templates``)."""

    DENIED = "denied"
    HELP = "help"
    ALREADY_RUNNING = "already_running"
    RETRY_WHILE_ACTIVE = "retry_while_active"
    NO_ACTIVE_TASK = "no_active_task"
    AUTOFIX_ON = "autofix_on"
    AUTOFIX_OFF = "autofix_off"
    AUTOFIX_USAGE = "autofix_usage"
    AUTOFIX_NOT_WATCHED = "autofix_not_watched"


@dataclass(frozen=True, slots=True)
class CreateTask:
    kind: ClassVar[ActionKind] = ActionKind.CREATE_TASK
    request: TaskRequest


@dataclass(frozen=True, slots=True)
class SendMessage:
    """A message for the active task: feedback, or a command (``command`` names it)."""

    kind: ClassVar[ActionKind] = ActionKind.MESSAGE
    task_id: str
    message_kind: MessageKind
    payload: dict[str, object] = field(default_factory=dict)
    requeue: bool = False
    quote: str = ""
    command: CommandName | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    kind: ClassVar[ActionKind] = ActionKind.REPLY
    text: ReplyKind
    quote: str = ""


@dataclass(frozen=True, slots=True)
class ShowStatus:
    kind: ClassVar[ActionKind] = ActionKind.STATUS
    task_id: str | None = None
    quote: str = ""


@dataclass(frozen=True, slots=True)
class React:
    kind: ClassVar[ActionKind] = ActionKind.REACT
    text: str = "eyes"


@dataclass(frozen=True, slots=True)
class ScheduleRound:
    """Review activity on the bot's change request with no task running there: it counts
    towards one review round, which starts after ``review.quiet_seconds`` of quiet."""

    kind: ClassVar[ActionKind] = ActionKind.ROUND


@dataclass(frozen=True, slots=True)
class SetAutofix:
    """``/agent autofix on|off`` on a change request: its CI fix rounds on or off."""

    kind: ClassVar[ActionKind] = ActionKind.AUTOFIX
    enabled: bool
    quote: str = ""


Action = CreateTask | SendMessage | Reply | ShowStatus | React | ScheduleRound | SetAutofix


WAITING_STATES = frozenset(
    {TaskState.AWAITING_APPROVAL, TaskState.AWAITING_INPUT, TaskState.PAUSED}
)


def is_own_or_bot(event: ForgeEvent, settings: Settings) -> bool:
    """Sent by a bot, or by the bot's own account (by its id: a person whose login is the
    App's slug without ``[bot]`` is a person)."""
    actor = event.actor
    return actor.is_bot or is_bot_account(
        settings, event.forge, login=actor.login, account_id=actor.id
    )


def owns_change_request(issue: IssueRef, settings: Settings) -> bool | None:
    """Whether ``issue`` is a change request the bot opened: its head is a bot branch of the
    same repository (not a fork's) and its author is the bot's account (by its id, else
    its whole login). None when only the author is unknown."""
    head = issue.head_branch or ""
    if not (issue.is_change_request and head.startswith(settings.workspace.branch_prefix)):
        return False
    if (issue.head_repo or "").lower() != issue.repo.full_name.lower():
        return False
    _, own_id = bot_account(settings, issue.repo.forge)
    if not issue.author and not (issue.author_id and own_id):
        return None
    return is_bot_account(
        settings, issue.repo.forge, login=issue.author, account_id=issue.author_id
    )


COMMENT_KINDS = frozenset(
    {EventKind.COMMENT_CREATED, EventKind.REVIEW_COMMENT, EventKind.REVIEW_SUBMITTED}
)


def classify(event: ForgeEvent, settings: Settings) -> Intent | Ignore:
    """First, I/O-free look at an event: its text is read for commands and a mention
    here, once."""
    news = _forge_news(event, settings)
    if news is not None:
        return news
    unaddressed = _unaddressed(event, settings)
    if unaddressed is not None:
        return unaddressed
    commands: tuple[Command, ...] = ()
    mention = None
    body = event.comment.body if event.comment else ""
    if event.kind in COMMENT_KINDS and MARKER_PREFIX not in body:
        commands = tuple(parse_commands(body, prefix=settings.commands.prefix))
        if not commands:
            mention = mention_text(body, bot_names=bot_names(settings, event.forge))
    return _judge(event, settings, commands, mention)


def refine(intent: Intent, event: ForgeEvent, settings: Settings) -> Intent | Ignore:
    """``intent`` for ``event`` as a look-up found it (the change request's author and
    head branch filled in, GitLab's labels and state as stored): what those facts decide
    is decided again; the commands and the mention stay as ``classify`` read them (a
    read-back whose text differs from the payload's is ignored before this)."""
    news = _forge_news(event, settings)
    if news is not None:
        return news
    unaddressed = _unaddressed(event, settings)
    if unaddressed is not None:
        return unaddressed
    return _judge(event, settings, intent.commands, intent.mention)


def _forge_news(event: ForgeEvent, settings: Settings) -> Intent | Ignore | None:
    """CI results and pushes are the forge's news, whoever caused them (the bot's own push
    too): they feed the one decision per head commit, nothing else (None: neither)."""
    if event.kind is EventKind.CHECKS_CHANGED:
        return _classify_checks(event, settings)
    if event.kind is EventKind.CHANGE_REQUEST_PUSHED:
        return _classify_push(event, settings)
    return None


def _unaddressed(event: ForgeEvent, settings: Settings) -> Ignore | None:
    if event.issue is None or event.repo is None:
        return Ignore(f"{event.name}/{event.action}: not about an issue")
    if is_own_or_bot(event, settings):
        return Ignore(f"sent by a bot ({event.actor.login})")
    return None


def _judge(
    event: ForgeEvent, settings: Settings, commands: tuple[Command, ...], mention: str | None
) -> Intent | Ignore:
    """The intent of an event about an issue, from its text's commands and mention."""
    assert event.issue is not None
    if not event.issue.is_open:
        return Ignore("the issue is closed")
    trigger = settings.labels.trigger
    if event.kind is EventKind.ISSUE_LABELED:
        if trigger in event.labels_added or event.label_added == trigger:
            return Intent(IntentKind.START, event)
        return Ignore("a label other than the trigger label")
    if event.kind is EventKind.ISSUE_OPENED:
        if trigger in event.issue.labels:
            return Intent(IntentKind.START, event)
        return Ignore("opened without the trigger label")
    if event.kind is EventKind.RUN_REQUESTED:
        return Intent(IntentKind.START, event, text=_text(IntentKind.START, event, None))
    if event.kind in COMMENT_KINDS:
        return _judge_comment(event, settings, commands, mention)
    return Ignore(f"{event.kind.value} events do not start or steer tasks")


def _on_bot_branch(branches: tuple[str, ...], settings: Settings) -> bool:
    prefix = settings.workspace.branch_prefix
    return any(branch.startswith(prefix) for branch in branches)


def _classify_checks(event: ForgeEvent, settings: Settings) -> Intent | Ignore:
    report = event.checks
    if event.repo is None or report is None or not report.head_sha:
        return Ignore("a CI report without a repository or commit")
    if not _on_bot_branch(report.branches, settings):
        return Ignore("checks of a commit on a branch that is not the bot's")
    return Intent(IntentKind.CI, event, on_bot_branch=True)


def _classify_push(event: ForgeEvent, settings: Settings) -> Intent | Ignore:
    issue = event.issue
    if issue is None or event.repo is None or event.head is None:
        return Ignore("a push without its change request or head")
    if owns_change_request(issue, settings) is False:
        return Ignore("a push to a change request the bot did not open")
    return Intent(IntentKind.PUSHED, event, on_bot_branch=True)


def _judge_comment(
    event: ForgeEvent, settings: Settings, commands: tuple[Command, ...], mention: str | None
) -> Intent | Ignore:
    assert event.issue is not None
    body = event.comment.body if event.comment else ""
    if MARKER_PREFIX in body:
        return Ignore("one of the bot's own comments")
    if commands:
        return Intent(IntentKind.COMMANDS, event, commands=commands)
    own = owns_change_request(event.issue, settings)
    if event.kind in (EventKind.REVIEW_COMMENT, EventKind.REVIEW_SUBMITTED):
        if own is False:
            return Ignore("a review on a change request the bot did not open")
        if _asks_for_changes(event):
            # a review, its line comments, a thread's notes: one round once they stop coming
            return Intent(
                IntentKind.ROUND, event, text=_text(IntentKind.ROUND, event, mention),
                on_bot_branch=True, author_unknown=own is None, mention=mention,
            )  # fmt: skip
        if not body.strip():
            return Ignore("an empty review")
    if own is not False and (mention is not None or _asks_for_changes(event)):
        kind = IntentKind.REVIEW
        text = _text(kind, event, mention)
        return Intent(
            kind, event, text=text, on_bot_branch=True, author_unknown=own is None, mention=mention
        )
    if mention is not None:
        return Intent(
            IntentKind.START, event, text=_text(IntentKind.START, event, mention), mention=mention
        )
    if not body.strip():
        return Ignore("an empty comment")
    return Intent(IntentKind.COMMENT, event, text=_text(IntentKind.COMMENT, event, mention))


def _text(kind: IntentKind, event: ForgeEvent, mention: str | None) -> str:
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


def _asks_for_changes(event: ForgeEvent) -> bool:
    """A line comment, or a review that comments or requests changes (not an approval)."""
    if event.kind is EventKind.REVIEW_COMMENT:
        return True
    state = str(event.extra.get("review_state") or "").lower()
    return event.kind is EventKind.REVIEW_SUBMITTED and state in FEEDBACK_REVIEW_STATES


def needs_permission(intent: Intent, *, active: Task | None) -> bool:
    """A plain comment on an issue without an active task needs no look-up at all."""
    return not (intent.kind is IntentKind.COMMENT and active is None)


def note_unused(intent: Intent, *, active: Task | None) -> bool:
    """Review activity with no task running on the change request: its only action is
    ``ScheduleRound``, which uses nothing of the comment (no text, no reaction) and whose
    round reads every thread and each author's permission from the forge itself. So
    GitLab's read-back of such a note (``bot.worker.readback``) may be spared."""
    return intent.kind is IntentKind.ROUND and active is None


def may_steer(permission: Permission) -> bool:
    return permission >= Permission.WRITE


def decide(
    intent: Intent,
    *,
    permission: Permission,
    active: Task | None,
    latest: Task | None,
    settings: Settings,
) -> list[Action]:
    """The actions for an intent (a REACT action first whenever the bot will act)."""
    event = intent.event
    assert event.issue is not None
    if intent.author_unknown:
        raise ValueError("look up the change request's author and refine the intent first")
    if intent.from_label and active is not None:
        return []  # GitHub sends "opened" and "labeled" for one new issue: no news twice
    if intent.kind is IntentKind.ROUND:
        return _round(intent, permission, active)
    if not may_steer(permission):
        if intent.kind is IntentKind.COMMENT:
            return []
        return [Reply(ReplyKind.DENIED, quote=_quote_of(intent))]
    if intent.kind is IntentKind.COMMENT:
        if active is None:
            return []
        return [_react(), _feedback(active, event, intent.text)]
    if intent.kind is IntentKind.REVIEW:
        return _follow_up(intent, active)
    if intent.kind is IntentKind.START:
        return _start(intent, active, TaskMode.RUN, intent.text)
    actions: list[Action] = [_react()]
    for command in intent.commands:
        actions.extend(_command(intent, command, active, latest, settings))
    return actions


def _react() -> Action:
    return React()


def _quote_of(intent: Intent) -> str:
    if intent.commands:
        return "\n".join(c.raw for c in intent.commands)
    if intent.event.comment is not None:
        return (
            intent.event.comment.body.strip().splitlines()[0] if intent.event.comment.body else ""
        )
    return ""


def _request(intent: Intent, mode: TaskMode, text: str, previous: str | None = None) -> TaskRequest:
    event = intent.event
    assert event.issue is not None
    return TaskRequest(
        issue=event.issue,
        requested_by=event.actor.login,
        mode=mode,
        instructions=text,
        trigger_comment_id=event.comment.id if event.comment else None,
        previous_task_id=previous,
    )


def _feedback(active: Task, event: ForgeEvent, text: str) -> Action:
    return SendMessage(
        active.id,
        MessageKind.FEEDBACK,
        payload={"author": event.actor.login, "body": text},
        requeue=active.state in WAITING_STATES,
    )


def _start(intent: Intent, active: Task | None, mode: TaskMode, text: str) -> list[Action]:
    if active is not None:
        if text:
            return [_react(), _feedback(active, intent.event, text)]
        return [Reply(ReplyKind.ALREADY_RUNNING, quote=_quote_of(intent))]
    return [_react(), CreateTask(_request(intent, mode, text))]


def _round(intent: Intent, permission: Permission, active: Task | None) -> list[Action]:
    """Review activity: nothing from people the bot does not act for (their threads are
    left alone); one more reason for a review round; and feedback for a task running on
    the change request, unless the round it runs holds this comment already (a thread
    the running task does not hold gets its answer in the round after it)."""
    if not may_steer(permission):
        return []
    event = intent.event
    if active is None:
        return [ScheduleRound()]
    held = active.request.round.comment_ids if active.request.round is not None else ()
    if event.comment is None or event.comment.id in held or not intent.text:
        return []
    return [_react(), ScheduleRound(), _feedback(active, event, intent.text)]


def _follow_up(intent: Intent, active: Task | None) -> list[Action]:
    if active is not None:
        return [_react(), _feedback(active, intent.event, intent.text)]
    request = _request(intent, TaskMode.FOLLOW_UP, intent.text)
    return [_react(), CreateTask(request)]


def _autofix(intent: Intent, command: Command) -> Action:
    issue = intent.event.issue
    assert issue is not None
    if not issue.is_change_request:
        return Reply(ReplyKind.AUTOFIX_NOT_WATCHED, quote=command.raw)
    enabled = autofix_switch(command.args)
    if enabled is None:
        return Reply(ReplyKind.AUTOFIX_USAGE, quote=command.raw)
    return SetAutofix(enabled, quote=command.raw)


def _command(
    intent: Intent, command: Command, active: Task | None, latest: Task | None, settings: Settings
) -> list[Action]:
    name = command.name
    if name in (CommandName.HELP, CommandName.UNKNOWN):
        return [Reply(ReplyKind.HELP, quote=command.raw)]
    if name is CommandName.AUTOFIX:
        return [_autofix(intent, command)]
    if name is CommandName.STATUS:
        task = active or latest
        return [ShowStatus(task.id if task else None, quote=command.raw)]
    if name in (CommandName.RUN, CommandName.PLAN):
        mode = TaskMode.RUN if name is CommandName.RUN else TaskMode.PLAN_ONLY
        if active is not None and not command.args:
            return [Reply(ReplyKind.ALREADY_RUNNING, quote=command.raw)]
        return _start(intent, active, mode, command.args)[1:]
    if name is CommandName.RETRY:
        if active is not None:
            return [Reply(ReplyKind.RETRY_WHILE_ACTIVE, quote=command.raw)]
        previous = latest.id if latest else None
        return [CreateTask(_request(intent, TaskMode.RETRY, command.args, previous))]
    if active is None:
        return [Reply(ReplyKind.NO_ACTIVE_TASK, quote=command.raw)]
    return [
        SendMessage(
            active.id,
            MessageKind.COMMAND,
            payload={"name": name.value, "args": command.args, "author": intent.event.actor.login},
            requeue=active.state in WAITING_STATES and name is not CommandName.PAUSE,
            quote=command.raw,
            command=name,
        )
    ]
