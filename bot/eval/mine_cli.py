"""``bot eval mine PATH_OR_URL --out tasks.jsonl [--limit N] [--since DATE]``.

The repository is a local clone or a git URL this machine reaches (cloned into a folder
of its own under the data directory, removed afterwards). Its forge is found from the
URL, or from a local clone's ``origin``: when that forge is configured (credentials in
config.yaml), its merged change requests are candidates too and the issues they and
commit messages name are read for the problem statements (``--no-issues``: the forge is
never asked). Each task is written to ``--out`` as soon as it is found, so an
interrupted run keeps what it found; each candidate's verdict is printed on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path, PurePosixPath
from typing import Any, TextIO
from urllib.parse import urlsplit

from bot.config import ConfigError, Settings, load_settings
from bot.eval.checkout import git
from bot.eval.mine import IssueSource, Mining, Source, Verdict, mine
from bot.forges.issue_urls import NotAnIssueUrl, parse_issue_url
from bot.sandbox.gitcmd import WorkspaceError

_SCP_LIKE = re.compile(r"^(?:[\w.-]+@)?(?P<host>[\w.-]+):(?P<path>[^/].*)$")


def add_mine_command(subparsers: Any) -> argparse.ArgumentParser:
    """``mine`` under ``bot eval`` (``subparsers``: what ``add_subparsers`` returned)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mine", help="tasks from a repository's own history (commits changing code and tests)"
    )
    parser.add_argument("source", metavar="PATH_OR_URL", help="a local clone or a git URL")
    parser.add_argument("--out", required=True, type=Path, help="the tasks file (JSONL)")
    parser.add_argument("--limit", type=_positive, help="at most this many tasks")
    parser.add_argument("--since", type=_date, help="only commits from this date (YYYY-MM-DD)")
    parser.add_argument(
        "--test-command", help="the tests' command, the test ids appended (default: pytest)"
    )
    parser.add_argument(
        "--setup", action="append", metavar="COMMAND",
        help="a set-up command (repeat for more; default: .agent.yaml's setup or detected)",
    )  # fmt: skip
    parser.add_argument(
        "--no-issues", action="store_true",
        help="never ask the forge (no linked issues, no merged change requests)",
    )  # fmt: skip
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def _date(text: str) -> str:
    try:
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def run_mine(args: argparse.Namespace, settings: Settings | None = None) -> int:
    """Run ``bot eval mine``; the settings are loaded from ``--config`` when not given."""
    if settings is None:
        try:
            settings = load_settings(os.environ, getattr(args, "config", None))
        except ConfigError as exc:
            print(f"bot: configuration error\n{exc}", file=sys.stderr)
            return 2
    try:
        test_command = tuple(shlex.split(args.test_command)) if args.test_command else None
    except ValueError as exc:
        print(f"bot: --test-command cannot be split: {exc}", file=sys.stderr)
        return 2
    if args.out.exists():
        print(f"bot: {args.out} exists: name a new file (nothing was written)", file=sys.stderr)
        return 2
    how = Mining(test_command=test_command, setup=tuple(args.setup) if args.setup else None,
                 limit=args.limit, since=args.since)  # fmt: skip
    try:
        return asyncio.run(_mine(settings, args, how))
    except (WorkspaceError, OSError) as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return 1


async def _mine(settings: Settings, args: argparse.Namespace, how: Mining) -> int:
    work = settings.data_dir / "eval"
    await asyncio.to_thread(work.mkdir, parents=True, exist_ok=True)
    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="mine-", dir=work))
    try:
        source = await _source(str(args.source), folder / "repository")
        if source is None:
            print(f"bot: {args.source} is not a git repository", file=sys.stderr)
            return 2
        async with _issues(settings, source, enabled=not args.no_issues) as issues:
            out = await asyncio.to_thread(_open, args.out)
            try:
                writer = _Writer(out)
                how = dataclasses.replace(how, issues=issues, report=writer.report,
                                          notice=writer.notice)  # fmt: skip
                tasks = await mine(source, settings=settings, work_dir=folder, how=how)
            finally:
                await asyncio.to_thread(out.close)
        print(f"{len(tasks)} task(s) written to {args.out} ({writer.dropped} candidate(s) "
              "dropped)", file=sys.stderr)  # fmt: skip
        return 0
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, True)


def _open(path: Path) -> TextIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("x", encoding="utf-8")  # never over a file that appeared meanwhile


class _Writer:
    """Writes each task as it is found; prints each verdict."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.dropped = 0

    async def report(self, verdict: Verdict) -> None:
        short = verdict.commit[:12]
        if verdict.task is None:
            self.dropped += 1
            print(f"dropped {short}: {verdict.reason}", file=sys.stderr)
            return
        line = json.dumps(verdict.task, ensure_ascii=False) + "\n"
        await asyncio.to_thread(_write, self.out, line)
        f2p = len(json.loads(verdict.task["FAIL_TO_PASS"]))
        p2p = len(json.loads(verdict.task["PASS_TO_PASS"]))
        change = verdict.task.get("change_request")
        merged = f" (change request {change})" if change is not None else ""
        kind = str(verdict.task["statement"]).replace("_", " ")
        print(f"kept {short}{merged}: {f2p} FAIL_TO_PASS, {p2p} PASS_TO_PASS, statement "
              f"from the {kind}", file=sys.stderr)  # fmt: skip

    async def notice(self, text: str) -> None:
        print(f"bot: {text}", file=sys.stderr)


def _write(out: TextIO, line: str) -> None:
    out.write(line)
    out.flush()


def is_url(text: str) -> bool:
    """Whether ``text`` is a git URL (``scheme://`` or ``user@host:path``), not a path."""
    return "://" in text or (_SCP_LIKE.match(text) is not None and not Path(text).exists())


async def _source(given: str, clone: Path) -> Source | None:
    """The repository to mine: a local clone as it is, or a URL cloned into ``clone``."""
    if is_url(given):
        await git("clone", "--quiet", "--no-tags", "--", given, str(clone), cwd=clone.parent)
        name = repo_name(web_url(given)) or PurePosixPath(urlsplit(given).path).name
        return Source(clone, name.removesuffix(".git") or clone.name, url=given)
    path = await asyncio.to_thread(Path(given).absolute)
    if not await asyncio.to_thread(path.is_dir):
        return None
    found = await git("rev-parse", "--show-toplevel", cwd=path, check=False)
    if found.code != 0:
        return None
    root = Path(found.stdout.strip())
    remote = await git("remote", "get-url", "origin", cwd=root, check=False)
    web = web_url(remote.stdout.strip()) if remote.code == 0 else ""
    return Source(root, repo_name(web) or root.name)


def web_url(remote: str) -> str:
    """The web address of a git remote (https or ssh form), without credentials or
    ``.git``; "" when it has none. Pure."""
    remote = remote.strip()
    scp = _SCP_LIKE.match(remote) if "://" not in remote else None
    if scp is not None:
        host, path = scp["host"], scp["path"]
    else:
        parts = urlsplit(remote)
        if parts.scheme not in ("http", "https", "ssh", "git") or not parts.hostname:
            return ""
        host = parts.hostname + (f":{parts.port}" if parts.port and parts.scheme != "ssh" else "")
        path = parts.path
    path = path.strip("/").removesuffix(".git")
    return f"https://{host}/{path}" if path else ""


def repo_name(web: str) -> str:
    return urlsplit(web).path.strip("/") if web else ""


@contextlib.asynccontextmanager
async def _issues(settings: Settings, source: Source, *, enabled: bool) -> AsyncIterator[
    IssueSource | None
]:  # fmt: skip
    """The forge of ``source`` when it is configured, for the linked issues."""
    from bot.runtime import Runtime

    web = web_url(source.url) if source.url else await _origin_web(source.path)
    ref = _repo_ref(web, settings) if enabled and web else None
    if ref is None:
        yield None
        return
    runtime = Runtime.from_settings(settings)
    try:
        forge = runtime.forge(ref.forge)
        yield IssueSource(forge, ref) if forge is not None else None
    finally:
        with contextlib.suppress(Exception):
            await runtime.stop()


async def _origin_web(root: Path) -> str:
    remote = await git("remote", "get-url", "origin", cwd=root, check=False)
    return web_url(remote.stdout.strip()) if remote.code == 0 else ""


def _repo_ref(web: str, settings: Settings) -> Any:
    """The repository on a configured forge that ``web`` is, or None."""
    for issue_path in ("/issues/1", "/-/issues/1"):
        with contextlib.suppress(NotAnIssueUrl):
            return parse_issue_url(web + issue_path, settings).repo
    return None
