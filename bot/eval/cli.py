"""``bot eval run|compare|status|mine``: the command's arguments and what each does."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.eval.agent_run import Approve
from bot.eval.compare import CompareRefused, compare_runs
from bot.eval.mine_cli import add_mine_command, run_mine
from bot.eval.queue import queue_eval, queue_states
from bot.eval.run import Progress, RunOptions, RunRefused, run_eval
from bot.eval.status import NotARun, run_status
from bot.storage.base import StoreError


def add_eval_command(subparsers: Any) -> None:
    """``eval`` and its verbs under the ``bot`` command's ``subparsers``."""
    parser = subparsers.add_parser("eval", help="measure the agent on SWE-bench-style tasks")
    verbs = parser.add_subparsers(dest="verb", required=True)
    run = verbs.add_parser("run", help="run tasks through the agent and score them")
    run.add_argument("tasks", type=Path, help="a JSONL file or a folder of JSON files")
    run.add_argument("--out", type=Path, required=True, help="the run folder")
    run.add_argument("--workers", type=_positive, default=1, help="tasks side by side")
    run.add_argument("--resume", action="store_true", help="finish the run in --out")
    approvals = "give (all) or refuse (none) every approval the agent asks for"
    run.add_argument("--approve", choices=[a.value for a in Approve], default="all", help=approvals)
    run.add_argument("--max-cost", type=float, help="US dollars per task")
    run.add_argument("--max-tokens", type=_positive, help="tokens per task (1000 or more)")
    run.add_argument("--max-run-cost", type=float, help="US dollars for the whole run")
    run.add_argument("--max-run-tokens", type=_positive, help="tokens for the whole run")
    queue = "put the tasks on the bot's queue for every machine's workers (PostgreSQL only)"
    run.add_argument("--queue", action="store_true", help=queue)
    compare = verbs.add_parser("compare", help="two runs side by side, with the paired difference")
    compare.add_argument("run_a", type=Path)
    compare.add_argument("run_b", type=Path)
    status = verbs.add_parser("status", help="a run folder's progress")
    status.add_argument("run", type=Path)
    add_mine_command(verbs)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def eval_command(settings: Settings, args: argparse.Namespace) -> int:
    if args.verb == "mine":
        return run_mine(args, settings)
    if args.verb == "compare":
        try:
            print(compare_runs(args.run_a, args.run_b))
        except CompareRefused as exc:
            print(f"bot eval compare: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.verb == "status":
        return _status(settings, args.run)
    return _run(settings, args)


def queue_refusal(settings: Settings) -> str:
    """Why ``--queue`` cannot be used with these settings ("" when it can)."""
    if settings.storage.backend != "postgres":
        instead = "run without --queue (--workers N runs tasks side by side on this machine)"
        return (
            "--queue needs PostgreSQL storage (storage.backend: postgres), whose queue the "
            f"workers of every machine share; this bot stores in SQLite: {instead}"
        )
    return ""


def _run(settings: Settings, args: argparse.Namespace) -> int:
    refusal = queue_refusal(settings) if args.queue else ""
    if refusal:
        print(f"bot eval run: {refusal}", file=sys.stderr)
        return 2
    if args.max_tokens is not None and args.max_tokens < 1000:
        print("bot eval run: --max-tokens must be 1000 or more", file=sys.stderr)
        return 2
    options = RunOptions(
        tasks=args.tasks, folder=args.out, workers=args.workers, resume=args.resume,
        approve=Approve(args.approve), task_cost=args.max_cost, task_tokens=args.max_tokens,
        run_cost=args.max_run_cost, run_tokens=args.max_run_tokens,
    )  # fmt: skip

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if args.queue:
        if args.workers != 1:
            progress("--workers is ignored with --queue: each worker's worker.max_workers applies")
        return _queue(settings, options, progress)
    try:
        summary = asyncio.run(run_eval(settings, options, progress))
    except RunRefused as exc:
        print(f"bot eval run: {exc}", file=sys.stderr)
        return 2
    low, high = summary["interval_95"]
    print(f"resolved {summary['resolved']} of {summary['finished']} "
          f"({summary['resolved_rate']:.1%}; 95% interval {low:.1%} to {high:.1%}); "
          f"report: {args.out / 'report.md'}")  # fmt: skip
    return 0


def _queue(settings: Settings, options: RunOptions, progress: Progress) -> int:
    try:
        done = asyncio.run(queue_eval(settings, options, progress))
    except (RunRefused, StoreError) as exc:
        print(f"bot eval run: {exc}", file=sys.stderr)
        return 2
    print(f"queued {done.queued}, on the queue already {done.on_queue}, scored here "
          f"{done.scored}, failed {done.failed}, refused {done.refused}; the workers of "
          f"`bot serve` run them; `bot eval status {options.folder}` follows the run")  # fmt: skip
    return 0


def _status(settings: Settings, run: Path) -> int:
    try:
        status = run_status(run)
    except NotARun as exc:
        print(f"bot eval status: {exc}", file=sys.stderr)
        return 2
    print(f"{run}: {status.line()}")
    if status.queued_run:
        try:
            states = asyncio.run(queue_states(settings, run))
        except StoreError as exc:
            print(f"bot eval status: the queue cannot be read: {exc}", file=sys.stderr)
            return 1
        counts = ", ".join(f"{state.value} {states[state]}" for state in sorted(states)) or "none"
        print(f"on the queue, not recorded yet: {counts}")
    return 0
