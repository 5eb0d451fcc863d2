"""The ``bot`` command: serve, doctor, config show, status, history, run, tasks, pause-all,
resume-all, action, eval."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, Literal, cast

import yaml

from bot import cli_tasks
from bot.config import ConfigError, Settings, load_settings, masked, secret_values
from bot.eval.cli import add_eval_command, eval_command
from bot.eval.queue_hook import EvalQueueHook
from bot.events import IssueRef, TaskMode, TaskRequest
from bot.runtime import Runtime
from bot.storage.base import TaskState
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
        "status": cli_tasks.status,
        "history": cli_tasks.history,
        "run": _run,
        "tasks": cli_tasks.tasks,
        "pause-all": cli_tasks.pause_all,
        "resume-all": cli_tasks.resume_all,
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
    worker = None
    if role in ("all", "worker"):  # it also runs `bot eval run --queue`'s tasks
        worker = Worker(runtime, hook=EvalQueueHook(runtime.store, runtime.current_settings))
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
