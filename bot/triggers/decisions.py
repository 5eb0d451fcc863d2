"""An intent -> what to do, without I/O: ``decide`` turns it into actions given the
actor's permission and the issue's active and latest task (start, reply, feedback, a
review round, ``/agent autofix``, nothing); ``needs_permission`` and ``note_unused`` say
which look-ups a decision can spare.
"""

from __future__ import annotations

from bot.config import Settings
from bot.events import Command, CommandName, ForgeEvent, MessageKind, TaskMode, TaskRequest
from bot.followup.ci import autofix_switch
from bot.forges.base import Permission
from bot.storage.base import Task
from bot.triggers.actions import (
    WAITING_STATES,
    Action,
    CreateTask,
    React,
    Reply,
    ReplyKind,
    ScheduleRound,
    SendMessage,
    SetAutofix,
    ShowStatus,
)
from bot.triggers.intent import Intent, IntentKind


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
