"""The dispatcher: inbox event -> permission look-up -> decision -> store + replies.

Runs in the worker role. For each leased inbox event it reads the intent the web app
classified and kept with the row (a row without one, from an older version, is
classified here), looks up what the payload leaves out when only that decides (a change
request's author or head branch; GitLab's note and labels as stored) and refines the
intent with what it found (``triggers.refine``), looks up the issue's tasks and, when
needed, the actor's permission (cached briefly), then carries out the decision: an eyes
reaction first (a label start's once its task exists), then the store change (which
finishes the event in the same transaction), then replies. CI results, pushes and review
activity on the bot's own change requests, and the looks the bot queued itself (the
poll), go to the aftercare (``aftercare.py``).
A forge failure gives the event back to be retried later; nothing is lost.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Protocol

import msgspec.structs

from bot import metrics, tracing
from bot.comments.replies import Replier
from bot.config import CurrentSettings
from bot.events import EventKind, ForgeEvent
from bot.forges.base import Forge, ForgeError, ForgeLookup
from bot.storage.base import Inbox, InboxEvent, Marks, Messages, Task, Tasks
from bot.triggers import (
    Action,
    CreateTask,
    Ignore,
    Intent,
    IntentKind,
    React,
    Reply,
    ReplyKind,
    ScheduleRound,
    SendMessage,
    SetAutofix,
    ShowStatus,
    classify,
    decide,
    needs_permission,
    note_unused,
    refine,
    stored_intent,
)
from bot.worker.aftercare import POLL_EVENT, Aftercare
from bot.worker.outcomes import event_retry_delay
from bot.worker.readback import read_back

log = logging.getLogger("bot.worker.dispatcher")

MAX_EVENT_ATTEMPTS = 6  # for events whose handling fails (``give_back``)


def reaction_target(event: ForgeEvent) -> tuple[int | None, bool]:
    """The comment to react on (None: the issue itself), and whether it is on a line of
    a change request's diff. A review has no reactions of its own: the eyes go on the
    change request."""
    comment = event.comment
    if comment is None or event.kind is EventKind.REVIEW_SUBMITTED:
        return None, False
    return comment.id, event.kind is EventKind.REVIEW_COMMENT and comment.is_review_comment


DENIAL_QUIET_SECONDS = 600.0  # at most one "only writers may..." per person and issue


def comment_key(event: ForgeEvent) -> str | None:
    """The forge's own identity of the comment (or note, or review) an event carries, with
    a digest of its text: a replay under a new delivery id has the same key; an edit that
    changes the text does not."""
    if event.comment is None or event.repo is None:
        return None
    digest = hashlib.sha256(event.comment.body.encode("utf-8")).hexdigest()[:16]
    where = f"{event.forge.value}:{event.repo.full_name}"
    return f"comment:{where}:{event.kind.value}:{event.comment.id}:{digest}"


def denial_key(event: ForgeEvent) -> str:
    assert event.issue is not None
    return f"denied:{event.issue.key}:{event.actor.login.lower()}"


async def give_back(store: Inbox, item: InboxEvent, exc: Exception) -> None:
    """The one retry of an inbox event whose handling failed: a forge error (waited out as
    the forge asks) or a crash of the handling itself, later, up to
    ``MAX_EVENT_ATTEMPTS``; then it is finished with the error kept."""
    forge = isinstance(exc, ForgeError)
    error = f"forge error: {exc}" if forge else repr(exc)
    if item.attempts >= MAX_EVENT_ATTEMPTS:
        log.error("giving up on event %s after %d attempts: %s", item.id, item.attempts, exc)
        await store.finish_event(item.id, error=error if forge else f"gave up: {error}")
        metrics.EVENTS.labels("failed").inc()
        return
    delay = event_retry_delay(item.attempts)
    retry_after = getattr(exc, "retry_after", None)
    if isinstance(retry_after, (int, float)):
        delay = max(delay, float(retry_after))
    log.warning("event %s: retrying in %.0f s: %s", item.id, delay, error)
    await store.retry_event(item.id, error=str(exc) if forge else error, delay_seconds=delay)
    metrics.EVENTS.labels("retried").inc()


class DispatchStore(Inbox, Tasks, Messages, Marks, Protocol):
    """What the dispatcher uses of the store: the inbox, the tasks and their messages
    (which finish an event in their own transaction), the marks of handled comments."""


class Dispatcher:
    def __init__(
        self,
        store: DispatchStore,
        *,
        settings: CurrentSettings,
        forges: ForgeLookup,
        replier: Replier,
        aftercare: Aftercare,
    ) -> None:
        self.store = store
        self.settings = settings
        self.forges = forges
        self.replier = replier
        self.aftercare = aftercare  # the bot's change requests after they were opened
        self.permissions = self.aftercare.permissions  # one cache for both

    async def handle(self, item: InboxEvent) -> None:
        """Handle one leased inbox event; never raises for forge trouble."""
        store = self.store
        try:
            event = ForgeEvent.from_dict(item.payload)
        except (KeyError, TypeError, ValueError) as exc:
            await store.finish_event(item.id, error=f"unreadable event: {exc}")
            metrics.EVENTS.labels("unreadable").inc()
            return
        key = "" if event.name == POLL_EVENT else item.delivery_key  # a webhook's row
        with tracing.dispatch_span(item.payload, item.id, item.attempts, key):
            try:
                if event.name == POLL_EVENT:  # queued by the bot itself, never by a webhook
                    await self.aftercare.on_poll(item, event)
                else:
                    await self._handle(item, event)
            except ForgeError as exc:
                await give_back(store, item, exc)

    def _classified(self, item: InboxEvent, event: ForgeEvent) -> Intent | Ignore:
        """The intent the web app kept with the row; a row without one (queued by a
        version before it kept one), or with one that does not read, is classified here."""
        try:
            kept = stored_intent(item.payload, event)
        except ValueError as exc:
            log.warning("event %s: its stored intent does not read (%s)", item.id, exc)
            kept = None
        return kept if kept is not None else classify(event, self.settings())

    async def _looked_up(self, verdict: Intent | Ignore, forge: Forge | None) -> Intent | Ignore:
        """``verdict``, refined with the change request looked up when what the payload
        leaves out decides: its author (GitLab names it by id), or its head branch (a
        comment in a GitHub pull request's conversation carries none) when the bot is
        mentioned."""
        if isinstance(verdict, Ignore):
            return verdict
        if forge is None:
            return Ignore("forge not configured")
        if verdict.kind in (IntentKind.CI, IntentKind.PUSHED):
            return verdict  # about a commit or branch, not an issue's conversation
        issue = verdict.event.issue
        assert issue is not None
        head_unknown = issue.is_change_request and issue.head_branch is None
        if not (verdict.author_unknown or (head_unknown and verdict.kind is IntentKind.START)):
            return verdict
        if verdict.author_unknown and not head_unknown:
            known = await self.aftercare.opened_by_the_bot(issue)
            if known is not None:  # a change request the bot watches: no look-up
                watched = msgspec.structs.replace(verdict.event, issue=known)
                return refine(verdict, watched, self.settings())
        details = (await forge.get_issue(issue.repo, issue.number, change_request=True)).issue
        if verdict.author_unknown and not details.author:
            return Ignore(f"the author of {issue.key} is unknown")
        issue = msgspec.structs.replace(
            issue,
            author=details.author or issue.author,
            author_id=details.author_id if details.author else issue.author_id,
            head_branch=issue.head_branch or details.head_branch,
            head_repo=issue.head_repo or details.head_repo,
        )
        found = msgspec.structs.replace(verdict.event, issue=issue)
        return refine(verdict, found, self.settings())

    async def _after_change_request(self, item: InboxEvent, verdict: Intent) -> bool:
        """CI results and pushes on the bot's branches, and review activity waiting for
        its round: the aftercare's (no permission to look up: the forge reports them, or
        they were looked at already). Whether it took the event."""
        event = verdict.event
        match verdict.kind:
            case IntentKind.CI:
                await self.aftercare.on_checks(item, event)
            case IntentKind.PUSHED:
                await self.aftercare.on_push(item, event)
            case IntentKind.ROUND if await self.aftercare.waiting_turn(item, event):
                pass
            case _:
                return False
        return True

    async def _as_stored(self, verdict: Intent, forge: Forge, *, note: bool) -> Intent | Ignore:
        """The verdict on what the forge stores now (``readback``: GitLab's notes, unless
        ``note`` is off, and labels), refined when that differs from the payload."""
        stored = await read_back(forge, verdict.event, note=note)
        if isinstance(stored, Ignore) or stored == verdict.event:
            return stored if isinstance(stored, Ignore) else verdict
        return await self._looked_up(refine(verdict, stored, self.settings()), forge)

    async def _handle(self, item: InboxEvent, event: ForgeEvent) -> None:
        store = self.store
        forge = self.forges(event.forge)
        verdict = await self._looked_up(self._classified(item, event), forge)
        if isinstance(verdict, Ignore) or forge is None:
            reason = verdict.reason if isinstance(verdict, Ignore) else "forge not configured"
            await store.finish_event(item.id, error=f"ignored: {reason}")
            metrics.EVENTS.labels("ignored").inc()
            return
        if await self._after_change_request(item, verdict):
            metrics.EVENTS.labels("handled").inc()
            return
        key = comment_key(event)
        if key is not None and not await store.claim(key, owner=str(item.id)):
            await store.finish_event(item.id, error="ignored: this comment was handled before")
            metrics.EVENTS.labels("ignored").inc()
            return
        event = verdict.event
        assert event.issue is not None
        active = await store.active_task_for(event.issue.key)
        latest = active or await store.latest_task_for(event.issue.key)
        if not needs_permission(verdict, active=active):
            await store.finish_event(item.id, error="ignored: comment without an active task")
            metrics.EVENTS.labels("ignored").inc()
            return
        # GitLab: the note (unless nothing of it is used) and labels as stored
        verdict = await self._as_stored(
            verdict, forge, note=not note_unused(verdict, active=active)
        )
        if isinstance(verdict, Ignore):
            await store.finish_event(item.id, error=f"ignored: {verdict.reason}")
            metrics.EVENTS.labels("ignored").inc()
            return
        event = verdict.event
        assert event.repo is not None
        permission = await self.permissions.of(forge, event.repo, event.actor.login)
        actions = decide(
            verdict,
            permission=permission,
            active=active,
            latest=latest,
            settings=self.settings(),
        )
        await self._carry_out(item, verdict, actions, forge)
        metrics.EVENTS.labels("handled").inc()

    async def _carry_out(
        self, item: InboxEvent, intent: Intent, actions: list[Action], forge: Forge
    ) -> None:
        event = intent.event
        assert event.issue is not None
        store = self.store
        event_id: int | None = item.id
        # A label start reacts once its task exists: GitHub sends "opened" and "labeled"
        # for one new issue, and the second finds the task the first just created.
        reacts = any(isinstance(a, React) for a in actions)
        react_later = intent.from_label and reacts
        if reacts and not react_later:
            await self._react(forge, event)
        replies: list[tuple[Action, Task | None]] = []
        for action in actions:
            match action:
                case CreateTask(request=request):
                    request = request.with_trace(tracing.inject())
                    task, created = await store.create_task(request, event_id=event_id)
                    tracing.note({"bot.task.id": task.id, "bot.task.created": created})
                    event_id = None
                    react_later = react_later and created
                    if not created and not intent.from_label:
                        replies.append((Reply(ReplyKind.ALREADY_RUNNING), task))
                case SendMessage(task_id=task_id):
                    await store.add_message(
                        task_id,
                        action.message_kind,
                        dict(action.payload),
                        event_id=event_id,
                        requeue=action.requeue,
                    )
                    event_id = None
                    if action.command is not None:  # a command is acknowledged
                        replies.append((action, await store.get_task(task_id)))
                case Reply(text=ReplyKind.DENIED):
                    # One answer per person and issue in a while: five refused comments (or
                    # GitHub's "opened" and "labeled" for one new issue) get one reply.
                    owner, quiet = str(item.id), DENIAL_QUIET_SECONDS
                    if await store.claim(denial_key(event), owner=owner, window=quiet):
                        replies.append((action, None))
                case Reply():
                    replies.append((action, None))
                case ShowStatus(task_id=task_id):
                    replies.append((action, await store.get_task(task_id) if task_id else None))
                case ScheduleRound():
                    await self.aftercare.on_review(item, event)  # it finishes the event
                    event_id = None  # or keeps it waiting: nothing else may finish it
                case SetAutofix(enabled=enabled, quote=said):
                    answer = await self.aftercare.set_autofix(event.issue, enabled)
                    replies.append((Reply(answer, quote=said), None))
                case React():
                    pass
        if event_id is not None:
            await store.finish_event(event_id)
        if react_later:
            await self._react(forge, event)
        for action, about in replies:
            try:
                await self.replier.reply(event.issue, action, about, seq=item.id)
            except ForgeError as exc:  # the store change is done; a lost reply is logged
                log.warning("could not reply on %s: %s", event.issue.key, exc)

    async def _react(self, forge: Forge, event: ForgeEvent) -> None:
        assert event.issue is not None
        try:
            comment_id, line_comment = reaction_target(event)
            await forge.add_reaction(event.issue, comment_id, "eyes", line_comment=line_comment)
        except ForgeError as exc:  # a missing reaction is not worth losing the event
            log.warning("could not react to %s: %s", event.issue.key, exc)
