"""The bot's change requests after they were opened, in the store: which task opened each
(a watch is added when a task that opened one ends done), and the after-PR record of each
(``bot.followup.record.ChangeRecord``) read, changed and saved back with the store's
version check, so two workers changing one record never lose each other's change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from bot.config import Settings, bot_names
from bot.events import IssueRef
from bot.followup.record import ChangeRecord
from bot.storage.base import StoreError, Task, Watch, Watches

R = TypeVar("R")
SAVE_ATTEMPTS = 8


async def change_record(
    store: Watches,
    key: str,
    change: Callable[[ChangeRecord], R],
    *,
    is_open: bool | None = None,
) -> tuple[Watch, ChangeRecord, R] | None:
    """Apply ``change`` to the record of watch ``key`` and save it (again from a fresh
    read when another save came first). None when nothing watches ``key``."""
    for _ in range(SAVE_ATTEMPTS):
        watch = await store.get_watch(key)
        if watch is None:
            return None
        record = ChangeRecord.from_dict(watch.data)
        result = change(record)
        data = record.to_dict()
        if await store.save_watch(key, data, version=watch.version, is_open=is_open):
            opened = watch.is_open if is_open is None else is_open
            return (
                replace(watch, data=data, version=watch.version + 1, is_open=opened),
                (record),
                result,
            )
    raise StoreError(f"the record of {key} kept changing under this worker")


def record_of(watch: Watch) -> ChangeRecord:
    return ChangeRecord.from_dict(watch.data)


def delivered_change_request(
    task: Task, delivery: dict[str, Any], settings: Settings
) -> IssueRef | None:
    """The change request a task's delivery opened on one of the bot's branches (None
    when it opened none: nothing changed, a follow-up on one, a branch not the bot's)."""
    number, branch = delivery.get("change_request_number"), delivery.get("branch")
    issue = task.request.issue
    if number is None or not isinstance(branch, str) or issue.is_change_request:
        return None
    if not branch.startswith(settings.workspace.branch_prefix):
        return None
    return IssueRef(
        repo=issue.repo,
        number=int(number),
        is_change_request=True,
        title=f"{issue.title} (#{issue.number})",
        web_url=str(delivery.get("change_request_url") or ""),
        author=bot_names(settings, issue.repo.forge)[0],
        head_branch=branch,
        head_repo=issue.repo.full_name,
    )


async def watch_delivered(
    store: Watches, task: Task, delivery: dict[str, Any], settings: Settings
) -> Watch | None:
    """Watch the change request ``task`` opened (once); the watch, or None."""
    change = delivered_change_request(task, delivery, settings)
    if change is None or change.head_branch is None:
        return None
    watch = Watch(
        key=change.key,
        repo_key=change.repo.key,
        branch=change.head_branch,
        task_id=task.id,
        issue=change,
    )
    await store.add_watch(watch)
    return await store.get_watch(change.key)
