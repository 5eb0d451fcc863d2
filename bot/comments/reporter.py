"""IssueReporter: progress events -> the issue (status comment, milestones, labels).

One status comment per task, edited in place and coalesced to at most one edit
per ``comments.edit_interval`` seconds (milestones too), plus the final edit in
``end()``; a separate comment per milestone. Every comment carries a marker; the
comment ids live in the store, and ``begin()`` also scans the bot's own comments
on the issue for markers, so a restarted worker edits what it already posted
instead of posting again. ``begin(snapshot)`` takes the status view (plan, progress,
tokens, waiting, links) the worker read from the task's checkpoint, so a resumed
task's status comment never falls back to an empty checklist.

A task resumed after an outage pause runs quietly: the issue keeps its pause
comment, status and ``paused`` label until the run shows something new (the model
answered, an action ran, a milestone), so a model that fails again right away
costs no forge write at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import weakref
from typing import Any

from bot import offload
from bot.comments.labels import managed, transition
from bot.comments.language import choose_language
from bot.comments.milestones import milestone_body
from bot.comments.render import Marker, find_markers, finish, fits, render
from bot.comments.status import StatusView, render_links
from bot.comments.wording import round_text
from bot.config import Settings, is_bot_account, secret_values
from bot.forges.base import Forge, ForgeError
from bot.run_events import (
    InterventionNeeded,
    Outcome,
    Paused,
    PauseReason,
    PhaseChanged,
    ProgressEvent,
    ProgressKind,
)
from bot.storage.base import CommentIds, StoreError, Task, TaskState
from bot.storage.runs import RunDirectory

log = logging.getLogger("bot.comments")

# End states that get a closing comment unless the coordinator already posted this kind.
_ENDINGS: dict[TaskState, ProgressKind | None] = {
    TaskState.STOPPED: None,
    TaskState.FAILED: None,
    TaskState.NEEDS_HUMAN: ProgressKind.HUMAN_INTERVENTION,
    TaskState.PAUSED: ProgressKind.PAUSED,
}
_STATUS = Marker("", "status", 0)  # the status comment's marker kind and key
# Labels known to exist, as (repository, label), per forge object (weakly: a forge that
# is gone, or a new one at the same address, starts afresh).
_ensured_labels: weakref.WeakKeyDictionary[object, set[tuple[str, str]]] = (
    weakref.WeakKeyDictionary()
)


def _nothing_new(event: ProgressEvent) -> bool:
    """Whether an event of a run resumed after an outage leaves the issue as it is: the
    phase it resumes in, or the same outage again (another pause, e.g. ``/agent pause``,
    is news)."""
    match event:
        case PhaseChanged():
            return True
        case Paused():
            return event.reason == PauseReason.LLM_UNAVAILABLE
    return False


def save_full_text(settings: Settings, marker: Marker, text: str) -> str:
    """Keep the whole (redacted) text of a comment cut to fit in the task's run
    directory; its path, or "" when it cannot be written."""
    try:
        run_dir = RunDirectory(settings.data_dir, marker.task_id)
        folder = run_dir.path / "comments"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{marker.kind}-{marker.seq}.md"
        path.write_text(text, encoding="utf-8")
    except (ValueError, OSError) as exc:
        log.warning("could not keep the full text of comment %s: %s", marker.key, exc)
        return ""
    return str(path)


def run_report_url(settings: Settings, task_id: str) -> str:
    """Where the bot serves a task's full run report to people: the task's dashboard page
    (behind the API token's login); "" without ``server.public_url``."""
    base = settings.server.public_url.rstrip("/")
    return f"{base}/dashboard/tasks/{task_id}" if base else ""


class IssueReporter:
    """``settings`` are the task's run's; ``comment_ids`` keeps the ids of the comments
    it posted, by marker."""

    def __init__(
        self, task: Task, forge: Forge, *, settings: Settings, comment_ids: CommentIds
    ) -> None:
        self.settings = settings
        self.comment_ids = comment_ids
        self.task = task
        self.forge = forge
        self.issue = task.request.issue
        self.language = choose_language(self.settings, f"{self.issue.title}\n{self.issue.body}")
        self.view = StatusView(state=TaskState.RUNNING)
        report_url = run_report_url(self.settings, task.id)
        if report_url:
            self.view.links["report_url"] = report_url
        if task.request.round is not None:  # a round on the change request says which
            self.view.after = round_text(task.request.round, self.language)
        self.emitted: set[ProgressKind] = set()
        self._counts: dict[str, int] = {}
        self._last_edit = 0.0
        self._flush: asyncio.Task[None] | None = None
        self._secrets = secret_values(settings)
        self._ids: dict[str, int] = {}  # marker key -> comment id, as the store keeps them
        # resumed after an outage pause: leave the issue as it is until something changes
        self._quiet = task.error == PauseReason.LLM_UNAVAILABLE.value

    @property
    def prefix(self) -> str:
        return self.settings.commands.prefix

    async def begin(self, snapshot: dict[str, Any] | None = None) -> None:
        """Recover comment ids and the status view, post or refresh the status comment,
        then the labels to processing."""
        await self.recover(snapshot)
        if not self._quiet:
            await self._show_running()

    async def _show_running(self) -> None:
        # The status comment first: it is the issue's first answer, and each forge write
        # waits its turn (a second apart); a label is created when it is first needed.
        await self._write_status()
        await self._set_labels(TaskState.RUNNING)

    async def recover(self, snapshot: dict[str, Any] | None = None) -> None:
        """Find this task's comments on the issue; take over its last status view."""
        await self._recover_markers()
        if snapshot is not None:
            self.view.restore(snapshot)

    async def handle(self, event: ProgressEvent) -> None:
        """The coordinator's ``emit``: fold into the status; post milestones."""
        self.view.apply(event)
        self.emitted.add(event.kind)
        if self._quiet:
            if _nothing_new(event):
                return
            self._quiet = False  # the run moves on: show it
            await self._show_running()
        body = milestone_body(event, self.language, prefix=self.prefix, links=self.view.links)
        if body is not None:
            seq = event.seq if event.seq is not None else self._next_seq(event.kind.value)
            kind = event.kind.value
            self._counts[kind] = max(self._counts.get(kind, 0), seq + 1)
            await self._upsert(Marker(self.task.id, kind, seq), body)
        self._schedule_status()

    async def end(self, outcome: Outcome) -> None:
        """Final status edit, the closing comment if the coordinator did not post one, labels.
        A quiet run that ends paused by the same outage changes nothing on the issue."""
        await self.aclose()
        same_outage = outcome.pause is PauseReason.LLM_UNAVAILABLE
        if self._quiet and outcome.state is TaskState.PAUSED and same_outage:
            return
        self.view.state = outcome.state
        if outcome.state in (TaskState.DONE, TaskState.QUEUED, TaskState.RUNNING):
            self.view.waiting = {}
        if outcome.state in _ENDINGS and not self._closed(outcome.state):
            await self._post_closing(outcome)
        await self._write_status()
        await self._set_labels(outcome.state)

    async def refresh(self, snapshot: dict[str, Any] | None, *, after: str) -> None:
        """Show the task's status comment again, as its checkpoint says, with ``after``
        (its change request after it was opened) below: one edit when the store knows
        the comment (a look at the issue's comments first otherwise)."""
        if await self._comment_id(_STATUS.key) is None:
            await self._recover_markers()
        if snapshot is not None:
            self.view.restore(snapshot)
        self.view.state = self.task.state
        self.view.after = after
        await self._write_status()

    async def note(self, kind: str, body: str) -> None:
        """Post (or edit, the second time) this task's one comment of ``kind``."""
        await self._upsert(Marker(self.task.id, kind, 0), body)

    async def label(self, state: TaskState) -> None:
        """The issue's labels for ``state`` (the managed labels created when first needed)."""
        await self._set_labels(state)

    async def aclose(self) -> None:
        """Drop a pending coalesced status edit (``end`` does; so should a run that is
        cancelled, so no stale view is written after it)."""
        if self._flush is not None:
            self._flush.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flush
            self._flush = None

    # --- internals ------------------------------------------------------------------------------

    def _closed(self, state: TaskState) -> bool:
        """Whether the issue already shows why the task is in ``state``: the coordinator
        said so (in this run or an earlier one: a model that is still down is announced
        once), or an earlier run posted the closing comment."""
        kind = _ENDINGS[state]
        if self._counts.get(f"end-{state.value}", 0) > 0:
            return True
        return kind is not None and (kind in self.emitted or self._counts.get(kind.value, 0) > 0)

    async def _post_closing(self, outcome: Outcome) -> None:
        reason = outcome.reason or ""
        if outcome.state is TaskState.STOPPED:
            links = render_links(self.view.links, self.language)
            body = render("stopped", self.language, prefix=self.prefix, links=links)
        elif outcome.state is TaskState.FAILED:
            body = render("failed", self.language, reason=reason, prefix=self.prefix)
        else:
            summary = dict(outcome.summary)
            closing: ProgressEvent
            if outcome.state is TaskState.NEEDS_HUMAN:
                summary.setdefault("reason", reason)
                closing = InterventionNeeded(summary=summary, reason=reason or "user")
            else:
                closing = Paused(reason=reason or PauseReason.PERSON.value)
            body = milestone_body(closing, self.language, prefix=self.prefix, links={}) or reason
        kind_name = f"end-{outcome.state.value}"
        await self._upsert(Marker(self.task.id, kind_name, self._next_seq(kind_name)), body)

    def _next_seq(self, kind: str) -> int:
        value = self._counts.get(kind, 0)
        self._counts[kind] = value + 1
        return value

    async def _recover_markers(self) -> None:
        details = await self.forge.get_issue(
            self.issue.repo, self.issue.number, change_request=self.issue.is_change_request
        )
        forge = self.issue.repo.forge
        for comment in details.comments:
            login, account = comment.author, comment.author_id
            if not is_bot_account(self.settings, forge, login=login, account_id=account):
                continue  # a marker in someone else's comment is not ours to edit
            for marker in find_markers(comment.body):
                if marker.task_id != self.task.id:
                    continue
                if await self._comment_id(marker.key) is None:
                    await self._keep_id(marker.key, comment.id)
                count = self._counts.get(marker.kind, 0)
                self._counts[marker.kind] = max(count, marker.seq + 1)

    async def _upsert(self, marker: Marker, body: str) -> None:
        # A large body (a long plan, a tool's output quoted whole) is redacted off the loop.
        clean = await offload.redact_text(body, known=self._secrets)
        max_length = self.settings.comments.max_length
        if not fits(clean, marker=marker, max_length=max_length):
            await asyncio.to_thread(save_full_text, self.settings, marker, clean)
        finished = functools.partial(
            finish,
            clean,
            marker=marker,
            language=self.language,
            max_length=max_length,
            secrets=self._secrets,
            report_url=self.view.links.get("report_url", ""),
        )
        large = len(clean) >= offload.LARGE_TEXT
        text = await offload.compute(finished) if large else finished()
        existing = await self._comment_id(marker.key)
        if existing is not None:
            try:
                await self.forge.edit_comment(self.issue, existing, text)
                return
            except ForgeError as exc:
                log.warning("could not edit comment %s (%s); posting anew", existing, exc)
        comment = await self.forge.create_comment(self.issue, text)
        await self._keep_id(marker.key, comment.id)

    async def _comment_id(self, key: str) -> int | None:
        """The id of the comment posted for ``key``: remembered, else from the store. A
        store that fails (the emergency stop's message must still go out) is no answer."""
        if key not in self._ids:
            try:
                found = await self.comment_ids.get_comment_id(self.task.id, key)
            except StoreError as exc:
                log.warning("comment %s: the store cannot say its id (%s)", key, exc)
                return None
            if found is not None:
                self._ids[key] = found
        return self._ids.get(key)

    async def _keep_id(self, key: str, comment_id: int) -> None:
        self._ids[key] = comment_id
        try:
            await self.comment_ids.put_comment_id(self.task.id, key, comment_id)
        except StoreError as exc:
            log.warning("comment %s: its id is not kept in the store (%s)", key, exc)

    async def _write_status(self) -> None:
        self._last_edit = time.monotonic()
        try:
            await self._upsert(Marker(self.task.id, _STATUS.kind, 0),
                               self.view.render(self.language))  # fmt: skip
        finally:  # the interval runs from when the edit went out, however long it took
            self._last_edit = time.monotonic()

    def _schedule_status(self) -> None:
        if self._flush is not None and not self._flush.done():
            return
        delay = self._last_edit + self.settings.comments.edit_interval - time.monotonic()
        self._flush = asyncio.create_task(self._delayed_status(max(delay, 0.0)))

    async def _delayed_status(self, delay: float) -> None:
        await asyncio.sleep(delay)
        wait = self._last_edit + self.settings.comments.edit_interval - time.monotonic()
        if wait > 0:  # the last edit went out later than planned (a slow write)
            await asyncio.sleep(wait)
        try:
            await self._write_status()
        except ForgeError as exc:
            log.warning("status comment update failed: %s", exc)

    async def _ensure_labels(self, names: list[str]) -> None:
        """Create those of ``names`` the repository may lack (once per forge object and
        repository): a label is created when it is first needed, not all seven up front."""
        try:
            ensured = _ensured_labels.setdefault(self.forge, set())
        except TypeError:  # a forge object that cannot be weakly referenced: no memory
            ensured = set()
        repo = self.issue.repo.key
        for name, color, description in managed(self.settings.labels):
            if name not in names or (repo, name) in ensured:
                continue
            await self.forge.ensure_label(
                self.issue.repo, name, color=color, description=description
            )
            ensured.add((repo, name))

    async def _set_labels(self, state: TaskState) -> None:
        details = await self.forge.get_issue(  # the labels as they are now, not the comments
            self.issue.repo,
            self.issue.number,
            change_request=self.issue.is_change_request,
            comments=False,
        )
        add, remove = transition(self.settings.labels, details.issue.labels, state)
        for label in remove:
            await self.forge.remove_label(self.issue, label)
        if add:
            await self._ensure_labels(add)
            await self.forge.add_labels(self.issue, add)
