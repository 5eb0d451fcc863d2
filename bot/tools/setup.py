"""Set-up before work: prepare the fresh clone so the project can be built and tested.

``Preparer.prepare`` clones the repository (if no tool has yet), plans the set-up
(``setup_plan``: the repository's ``setup:`` or detected commands), and then either
finds the workspace prepared by an earlier run (a marker in ``.git``, which no command
can write), restores the environment from the cache (``setup_cache``: the installs are
skipped; nothing is written through a link), or runs the commands one by one in the
sandbox WITH network (through the egress proxy: the package indexes only), without any
credential of the bot's, with the host's package-manager configuration (``setup_env``),
within ``sandbox.setup_timeout`` for all of them.

Set-up gets network, and its result is cached, only when the working tree is the base
branch's as it is: whatever set-up executes (the scripts it names, what they call, a
Makefile's includes, package scripts, an in-tree build backend, code a build imports)
then comes from the base branch. A tree that differs anywhere (the bot's own branch on
a follow-up: model output) is set up offline and not cached; a cached environment made
from the base branch may still be restored into it. A workspace is set up once: what the agent
changes later is never set up. What set-up leaves in the workspace (``.venv``,
``node_modules``, ...) is excluded from the agent's commits (``.git/info/exclude``) and
cached. Each command's whole output is kept in the run
directory (``setup/NN-<program>.log``); a failing one is reported with its tail.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from bot import tracing
from bot.forges.base import ForgeError
from bot.tools.gitcmd import WorkspaceError
from bot.tools.repo_config import Argv
from bot.tools.sandbox import CommandRefused, Sandbox, SandboxUnavailable, WorkspaceFull
from bot.tools.setup_cache import SetupCache
from bot.tools.setup_env import PackageConfig
from bot.tools.setup_plan import SetupPlan, SetupSource, Which, cache_key, plan_setup
from bot.tools.workspace import Workspace

MARKER = "agent-setup.json"  # in .git: read-only for every sandboxed command
TAIL_CHARS = 3000
NAMED_CHANGES = 10  # the changed paths a note names
TAIL_LINES = 40
# Quiet, non-interactive installers; the host's configuration comes on top.
SETUP_ENV = {
    "PIP_NO_INPUT": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_PROGRESS_BAR": "off",
    "npm_config_update_notifier": "false",
    "npm_config_progress": "false",
}


class SetupStatus(StrEnum):
    NOTHING = "nothing"  # nothing to set up
    RAN = "ran"  # the commands ran and succeeded
    RESTORED = "restored"  # the cached environment was copied in: no install ran
    READY = "ready"  # an earlier run of this task prepared this workspace
    FAILED = "failed"
    UNAVAILABLE = "unavailable"  # no clone yet (the forge refused it): tried again later
    SKIPPED = "skipped"  # no sandbox on this server: no command could use what set-up makes


@dataclass(frozen=True, slots=True)
class SetupStep:
    command: str
    exit_code: int
    timed_out: bool
    duration: float
    tail: str = ""
    log: str = ""  # the file in the run directory with the whole output

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "duration": round(self.duration, 2),
            "tail": self.tail,
            "log": self.log,
        }


@dataclass(frozen=True, slots=True)
class SetupResult:
    status: SetupStatus
    source: SetupSource = SetupSource.NONE
    key: str = ""
    steps: tuple[SetupStep, ...] = ()
    duration: float = 0.0
    paths: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    error: str = ""

    @property
    def failure(self) -> SetupStep | None:
        return next((step for step in self.steps if not step.ok), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "source": self.source.value,
            "key": self.key,
            "steps": [step.to_dict() for step in self.steps],
            "duration": round(self.duration, 2),
            "paths": list(self.paths),
            "notes": list(self.notes),
            "error": self.error,
        }


@dataclass
class Preparer:
    """Prepares one task's workspace; ``sandbox`` makes the set-up sandbox (the given
    configuration files shown; network or not) and ``package`` reads the host's
    configuration."""

    workspace: Workspace
    configured: tuple[Argv, ...] | None
    sandbox: Callable[[tuple[Path, ...], bool], Sandbox]
    package: Callable[[], PackageConfig]
    cache: SetupCache | None
    timeout: float
    which: Which
    clock: Callable[[], float] = time.monotonic
    _notes: list[str] = field(default_factory=list)

    async def prepare(self, *, log_dir: Path | None = None) -> SetupResult:
        started = self.clock()
        try:
            root = await self.workspace.ensure()
        except (WorkspaceError, ForgeError) as exc:
            return SetupResult(SetupStatus.UNAVAILABLE, error=f"no clone: {exc}")
        plan = await asyncio.to_thread(plan_setup, root, self.configured, which=self.which)
        if not plan.commands:
            return SetupResult(SetupStatus.NOTHING, plan.source, notes=plan.notes)
        marker = await asyncio.to_thread(_read_marker, root)
        if marker:  # set up by an earlier run; changes since are the agent's, never set up
            key = str(marker.get("key", ""))
            return SetupResult(SetupStatus.READY, plan.source, key, paths=tuple(marker["paths"]))
        key = await asyncio.to_thread(cache_key, root, plan, which=self.which)
        restored = await self._restore(key, root)
        if restored is not None:
            await self._finish(root, key, restored)
            return SetupResult(SetupStatus.RESTORED, plan.source, key,
                               duration=self.clock() - started, paths=tuple(restored),
                               notes=plan.notes)  # fmt: skip
        return await self._run(plan, key, root, log_dir, started)

    async def _restore(self, key: str, root: Path) -> list[str] | None:
        if self.cache is None:
            return None
        return await asyncio.to_thread(self.cache.restore, key, root)

    async def _run(
        self, plan: SetupPlan, key: str, root: Path, log_dir: Path | None, started: float
    ) -> SetupResult:
        before = set(await self.workspace.untracked())
        package = await asyncio.to_thread(self.package)
        changed = await self.workspace.differs_from_base()
        sandbox = self.sandbox(package.expose, not changed)
        env = {**SETUP_ENV, **package.env}
        steps: list[SetupStep] = []
        notes = list(plan.notes) + [f"not passed to set-up: {why}" for why in package.left_out]
        if changed:
            shown = ", ".join(changed[:NAMED_CHANGES])
            more = (
                f" and {len(changed) - NAMED_CHANGES} more" if len(changed) > NAMED_CHANGES else ""
            )
            notes.append(
                f"set-up ran without network and is not cached: the working tree differs from "
                f"the base branch ({shown}{more}); with network it could run what the agent wrote"
            )
        for number, argv in enumerate(plan.commands, start=1):
            left = self.timeout - (self.clock() - started)
            log = log_dir / f"{number:02d}-{_program(argv)}.log" if log_dir else None
            try:
                with tracing.command_span("setup step", shlex.join(argv)) as span:
                    step = await _run_step(sandbox, argv, root, env, left, log)
                    tracing.command_ended(span, step.exit_code, timed_out=step.timed_out,
                                          ok=step.ok)  # fmt: skip
            except SandboxUnavailable as exc:  # the agent's commands cannot run either
                return SetupResult(SetupStatus.SKIPPED, plan.source, key, error=str(exc))
            steps.append(step)
            if not step.ok:
                return SetupResult(SetupStatus.FAILED, plan.source, key, tuple(steps),
                                   self.clock() - started, notes=tuple(notes))  # fmt: skip
        made = sorted(set(await self.workspace.untracked()) - before)
        await asyncio.to_thread(_exclude, root, made)
        if await self.workspace.changed_files():
            notes.append("set-up changed files of the repository: its result is not cached")
        elif self.cache is not None and not changed:
            await asyncio.to_thread(self.cache.store, key, root, made)
        await asyncio.to_thread(_write_marker, root, key, made)
        return SetupResult(SetupStatus.RAN, plan.source, key, tuple(steps),
                           self.clock() - started, tuple(made), tuple(notes))  # fmt: skip

    async def _finish(self, root: Path, key: str, paths: list[str]) -> None:
        await asyncio.to_thread(_exclude, root, paths)
        await asyncio.to_thread(_write_marker, root, key, paths)


async def _run_step(
    sandbox: Sandbox, argv: Argv, root: Path, env: dict[str, str], left: float, log: Path | None
) -> SetupStep:
    command = shlex.join(argv)
    if left <= 0:
        return SetupStep(command, -1, True, 0.0, "set-up ran out of time (sandbox.setup_timeout)")
    try:
        result = await sandbox.run(
            argv, cwd=root, writable=root, timeout=left, env=env, log_path=log
        )
    except (CommandRefused, WorkspaceFull, ValueError) as exc:
        return SetupStep(command, -1, False, 0.0, str(exc))
    tail = await asyncio.to_thread(_log_tail, log) if log else ""
    if not tail:
        tail = _tail(result.stdout + ("\n" if result.stdout else "") + result.stderr)
    name = f"{log.parent.name}/{log.name}" if log else ""
    return SetupStep(command, result.exit_code, result.timed_out, result.duration, tail, name)


def _program(argv: Argv) -> str:
    name = Path(argv[0]).name
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:40] or "command"


def _tail(text: str) -> str:
    lines = text.rstrip().splitlines()[-TAIL_LINES:]
    return "\n".join(lines)[-TAIL_CHARS:]


def _log_tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(size - 4 * TAIL_CHARS, 0))
            return _tail(handle.read().decode("utf-8", errors="replace"))
    except OSError:
        return ""


def _read_marker(root: Path) -> dict[str, Any]:
    try:
        data = json.loads((root / ".git" / MARKER).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("paths"), list) else {}


def _write_marker(root: Path, key: str, paths: list[str]) -> None:
    text = json.dumps({"key": key, "paths": paths})
    (root / ".git" / MARKER).write_text(text, "utf-8")


def _exclude(root: Path, paths: list[str]) -> None:
    """Keep what set-up made out of the agent's commits (git's own per-clone ignore file)."""
    if not paths:
        return
    exclude = root / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    current = exclude.read_text("utf-8").splitlines() if exclude.exists() else []
    lines = [f"/{_escaped(p)}" for p in paths if f"/{_escaped(p)}" not in current]
    if lines:
        with exclude.open("a", encoding="utf-8") as handle:
            handle.write("".join(f"{line}\n" for line in lines))


def _escaped(path: str) -> str:
    """A path as a literal gitignore pattern."""
    out = "".join(f"\\{c}" if c in "*?[]\\!#" else c for c in path)
    return out if not out.endswith(" ") else out[:-1] + "\\ "
