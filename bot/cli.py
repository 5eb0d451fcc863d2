"""The ``bot`` command: serve, doctor, config show, status, history, run, tasks, pause-all,
resume-all, action, eval."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import glob
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, cast

import yaml

from bot.config import ConfigError, Settings, load_settings, masked, secret_values
from bot.eval.cli import add_eval_command, eval_command
from bot.events import IssueRef, TaskMode, TaskRequest
from bot.runtime import Runtime
from bot.storage.base import Store, TaskState
from bot.worker import Worker

Role = Literal["all", "web", "worker"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bot", description=__doc__)
    parser.add_argument("--config", help="config file (default: $BOT_CONFIG or ./config.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="receive webhooks and run tasks")
    serve.add_argument("--config", dest="sub_config", help=argparse.SUPPRESS)
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--role", choices=["all", "web", "worker"], default="all")
    sub.add_parser("doctor", help="check configuration, storage, forges, LLM, sandbox")
    config = sub.add_parser("config", help="configuration")
    config.add_argument("action", choices=["show"])
    status = sub.add_parser("status", help="list tasks")
    status.add_argument("--json", action="store_true")
    status.add_argument("--limit", type=int, default=50)
    history = sub.add_parser("history", help="print a task's planning history")
    history.add_argument("task_id")
    tasks = sub.add_parser("tasks", help="list, show and control tasks (on the store directly)")
    verbs = tasks.add_subparsers(dest="verb", required=True)
    listed = verbs.add_parser("list", help="list tasks, newest first")
    listed.add_argument("--state", choices=[s.value for s in TaskState])
    listed.add_argument("--json", action="store_true")
    listed.add_argument("--limit", type=int, default=50)
    for verb, text in (
        ("show", "a task's state, plan, tokens and links"),
        ("stop", "stop a task at its next safe point (as /agent stop)"),
        ("pause", "pause a task at its next safe point (as /agent pause)"),
        ("resume", "resume a paused or waiting task (as /agent resume)"),
        ("retry", "start a new task for an ended task's issue (as /agent retry)"),
    ):
        verbs.add_parser(verb, help=text).add_argument("task_id", help="a task id or its start")
    sub.add_parser("pause-all", help="emergency stop: running tasks pause, queued tasks wait")
    sub.add_parser("resume-all", help="end the emergency stop and resume what it paused")
    run = sub.add_parser("run", help="run one task now, without a webhook")
    run.add_argument("issue_url")
    run.add_argument("--dry-run", action="store_true", help="plan, print, write nothing")
    sub.add_parser("action", help="run once for a GitHub Actions event (docs/github-action.md)")
    add_eval_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "action":  # its settings come from the runner's environment
        return _action()
    config_path = getattr(args, "sub_config", None) or args.config
    try:
        settings = load_settings(os.environ, config_path)
    except ConfigError as exc:
        print(f"bot: configuration error\n{exc}", file=sys.stderr)
        return 2
    _logging(settings)
    handlers = {
        "serve": _serve,
        "doctor": _doctor,
        "config": _config_show,
        "status": _status,
        "history": _history,
        "run": _run,
        "tasks": _tasks,
        "pause-all": _pause_all,
        "resume-all": _resume_all,
        "eval": eval_command,
    }
    return handlers[args.command](settings, args)


def _logging(settings: Settings | None, known: Sequence[str] = ()) -> None:
    from bot.redact import RedactingFilter

    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    secrets = secret_values(settings) if settings is not None else ()
    handler.addFilter(RedactingFilter((*secrets, *known)))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("BOT_LOG_LEVEL", "INFO").upper())


def _action() -> int:
    from bot.action.run import run_action
    from bot.config.env import ENV_SECRETS

    names = (*ENV_SECRETS, "LLM_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    _logging(None, [os.environ[name] for name in names if os.environ.get(name)])
    return asyncio.run(run_action(os.environ))


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    from bot import http_server
    from bot.app import create_app

    updates: dict[str, Any] = {}
    if args.host:
        updates["host"] = args.host
    if args.port:
        updates["port"] = args.port
    if updates:
        server = settings.server.model_copy(update=updates)
        settings = settings.model_copy(update={"server": server})
    problem = settings.server.api_token_problem()
    if problem is not None:
        print(f"bot: configuration error\n{problem}", file=sys.stderr)
        return 2
    role = cast(Role, args.role)
    # The store's writer thread needs the GIL briefly and often; the default 5 ms switch
    # interval makes it wait behind request handling under load.
    sys.setswitchinterval(0.0005)
    # Request handling allocates many short-lived objects that reference counting frees;
    # collect cycles less often so the collector does not stall requests under load.
    gc.set_threshold(20_000, 20, 20)
    runtime = Runtime.from_settings(settings)
    worker = Worker(runtime) if role in ("all", "worker") else None
    if worker is not None and role == "worker" and args.port is None:
        return asyncio.run(_worker_only(runtime, worker))  # no HTTP at all (several on one host)
    app = create_app(runtime, worker=worker, webhooks=role != "worker")
    # Everything imported so far lives as long as the process: keep it out of the
    # collector's full passes, which would otherwise walk it all and stall requests.
    gc.freeze()
    http_server.run(app, settings)
    return 0


async def _worker_only(runtime: Runtime, worker: Worker) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await runtime.start()
    await worker.start()
    runtime.watch_reload_signal(os.environ)
    logging.getLogger("bot").info(
        "worker running; Ctrl-C to stop (with --port it also serves /healthz, /readyz, /metrics)"
    )
    try:
        await stop.wait()
    finally:
        await worker.stop()
        await runtime.stop()
    return 0


def _doctor(settings: Settings, args: argparse.Namespace) -> int:
    from bot.doctor import failed, format_checks, run_checks

    async def go() -> int:
        runtime = Runtime.from_settings(settings)
        try:
            checks = await run_checks(settings, runtime)
        finally:
            await runtime.stop()
        print(format_checks(checks))
        return 1 if failed(checks) else 0

    return asyncio.run(go())


def _config_show(settings: Settings, args: argparse.Namespace) -> int:
    print(yaml.safe_dump(masked(settings), sort_keys=False, allow_unicode=True), end="")
    return 0


def _status(settings: Settings, args: argparse.Namespace) -> int:
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


def _tasks(settings: Settings, args: argparse.Namespace) -> int:
    from bot.worker import operator

    if args.verb == "list":
        return _status(settings, args)
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


def _pause_all(settings: Settings, args: argparse.Namespace) -> int:
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


def _resume_all(settings: Settings, args: argparse.Namespace) -> int:
    from bot.worker import operator

    async def work(store: Store) -> int:
        resumed = await operator.resume_all(store, by=_operator())
        print(f"tasks run again; {len(resumed)} task(s) paused by pause-all resume")
        return 0

    return _on_store(settings, work)


def _time(epoch: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _history(settings: Settings, args: argparse.Namespace) -> int:
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


def _run(settings: Settings, args: argparse.Namespace) -> int:
    from bot.forges.issue_urls import NotAnIssueUrl, parse_issue_url

    try:
        ref = parse_issue_url(args.issue_url, settings)
    except NotAnIssueUrl as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_run_now(settings, ref, dry_run=args.dry_run))


async def _run_now(settings: Settings, ref: IssueRef, *, dry_run: bool) -> int:
    from bot.forges.issue_urls import canonical_issue
    from bot.oneshot import plan_once, run_once

    runtime = Runtime.from_settings(settings)
    forge = runtime.forge(ref.repo.forge)
    if forge is None:
        print(f"bot: {ref.repo.forge.value} is not configured (see bot doctor)", file=sys.stderr)
        await runtime.stop()
        return 2
    try:
        await runtime.store.open()
        runtime.start_traces(os.environ)
        details = await forge.get_issue(ref.repo, ref.number, change_request=ref.is_change_request)
        issue = canonical_issue(ref, details.issue, settings)  # named as the forge names it
        request = TaskRequest(issue=issue, requested_by="cli", mode=TaskMode.RUN)
        if dry_run:
            print(json.dumps(await plan_once(runtime, request), indent=2, ensure_ascii=False))
            return 0
        outcome = await run_once(runtime, request)
        print(f"task finished: {outcome.state.value} {outcome.reason}".rstrip())
        return 0 if outcome.state.value == "done" else 1
    finally:
        with contextlib.suppress(Exception):
            await runtime.stop()
