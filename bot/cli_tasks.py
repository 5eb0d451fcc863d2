"""The ``bot`` commands that work on the store and the run folders directly: ``status``,
``tasks`` (list, show, stop, pause, resume, retry), ``pause-all``, ``resume-all``,
``history``. ``cli.main`` dispatches to them.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from bot.config import Settings
from bot.storage.base import Store, TaskState


def status(settings: Settings, args: argparse.Namespace) -> int:
    from bot.storage.factory import open_store

    state = getattr(args, "state", None)
    states = frozenset({TaskState(state)}) if state else None

    async def go() -> list[dict[str, Any]]:
        store = open_store(settings)
        await store.open()
        try:
            tasks = await store.list_tasks(states=states, limit=args.limit)
        finally:
            await store.close()
        return [
            {
                "id": t.id,
                "forge": t.request.issue.repo.forge.value,
                "repository": t.request.issue.repo.full_name,
                "issue": t.request.issue.number,
                "state": t.state.value,
                "phase": t.phase,
                "created_at": t.created_at,
                "updated_at": t.updated_at,
                "error": t.error,
            }
            for t in tasks
        ]

    rows = asyncio.run(go())
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no tasks yet")
    for row in rows:
        print(
            f"{row['id'][:8]}  {row['forge']:<6} {row['repository']}#{row['issue']:<6} "
            f"{row['state']:<17} {_time(row['updated_at'])}"
        )
    return 0


def _operator() -> str:
    import getpass

    return f"{getpass.getuser()} (bot CLI)"


def _on_store(settings: Settings, work: Callable[[Store], Awaitable[int]]) -> int:
    """``work(store)`` with the configured store open; an operator's refusal is exit 1."""
    from bot.storage.factory import open_store
    from bot.worker.operator import OperatorError

    async def go() -> int:
        store = open_store(settings)
        await store.open()
        try:
            return await work(store)
        except OperatorError as exc:
            print(f"bot: {exc}", file=sys.stderr)
            return 1
        finally:
            await store.close()

    return asyncio.run(go())


def tasks(settings: Settings, args: argparse.Namespace) -> int:
    from bot.worker import operator

    if args.verb == "list":
        return status(settings, args)
    if args.verb == "show":
        return _on_store(settings, lambda store: _show(settings, store, args.task_id))

    async def control(store: Store) -> int:
        by = _operator()
        if args.verb == "retry":
            task = await operator.retry(store, args.task_id, by=by)
            print(f"task {task.id} queued for {task.issue_key} (retry)")
            return 0
        name = operator.TaskCommand(args.verb)
        task = await operator.command(store, args.task_id, name, by=by)
        print(f"task {task.id}: {name.value} sent; the task acts on it at its next safe point")
        return 0

    return _on_store(settings, control)


async def _show(settings: Settings, store: Store, task_id: str) -> int:
    from bot.record.snapshot import checklist, status_snapshot
    from bot.worker.operator import find_task

    task = await find_task(store, task_id)
    issue = task.request.issue
    print(f"task      {task.id}")
    print(f"issue     {issue.key}  {issue.web_url}".rstrip())
    print(f"state     {task.state.value}" + (f" ({task.phase})" if task.phase else ""))
    print(f"asked by  {task.request.requested_by} ({task.request.mode.value})")
    print(f"created   {_time(task.created_at)}   updated {_time(task.updated_at)}")
    if task.error:
        print(f"error     {task.error}")
    snapshot = status_snapshot(await store.load_checkpoint(task.id))
    if snapshot is not None:
        print(f"tokens    {snapshot['total_tokens']:,}   revisions {snapshot['revisions']}")
        for key, value in snapshot["links"].items():
            print(f"{key:<9} {value}")
        items = checklist(snapshot)
        if items:
            print("plan")
        for item in items:
            print(f"  [{item['status']:<7}] {item['id']}: {item['description']}")
    report = settings.data_dir / "runs" / task.id / "report.md"
    if report.is_file():
        print(f"report    {report}")
    return 0


def pause_all(settings: Settings, args: argparse.Namespace) -> int:
    from bot.worker import operator

    async def work(store: Store) -> int:
        switch = await operator.pause_all(store, by=_operator())
        print(
            f"all tasks paused by {switch.by}: {len(switch.tasks)} running task(s) pause at "
            "their next safe point, queued tasks wait; webhooks are still received. "
            "`bot resume-all` ends it."
        )
        return 0

    return _on_store(settings, work)


def resume_all(settings: Settings, args: argparse.Namespace) -> int:
    from bot.worker import operator

    async def work(store: Store) -> int:
        resumed = await operator.resume_all(store, by=_operator())
        print(f"tasks run again; {len(resumed)} task(s) paused by pause-all resume")
        return 0

    return _on_store(settings, work)


def _time(epoch: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def history(settings: Settings, args: argparse.Namespace) -> int:
    from bot.record.history import HistoryError, format_timeline, history_path

    try:
        path = history_path(settings.data_dir, args.task_id)
    except ValueError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return 2
    if not path.exists():  # a unique prefix of the id is enough, as `bot status` shows it
        matches = sorted(path.parent.glob(f"{glob.escape(args.task_id)}*.jsonl"))
        if len(matches) != 1:
            print(f"bot: no planning history for task {args.task_id}", file=sys.stderr)
            return 1
        path = matches[0]
    try:
        print(format_timeline(path))
    except HistoryError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return 1
    return 0
