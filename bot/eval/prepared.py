"""A checkout made ready for tests, as a task's clone is: a fresh clone at one commit, its
set-up (the task's own commands, else the repository's ``.agent.yaml`` ``setup:``, else
detected) run by the bot's ``Preparer`` with network in the sandbox and cached per
repository and lock files, and the sandbox its tests run in (no network). The checkout
is removed when ``prepared``'s context ends, on every path.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.config import Settings
from bot.eval.checkout import CheckoutError, check_out, project_key
from bot.eval.testrun import TestCommand
from bot.sandbox.sandbox import Sandbox, hidden_paths
from bot.sandbox.setup import SetupResult, SetupStatus
from bot.sandbox.setup_plan import Argv
from bot.tools.factory import setup_preparer
from bot.tools.repo_config import RepoConfigError, command_argv, parse_repo_config

REPO_CONFIG = ".agent.yaml"
_READY = frozenset({SetupStatus.NOTHING, SetupStatus.RAN, SetupStatus.RESTORED,
                    SetupStatus.READY})  # fmt: skip


@dataclass(frozen=True, slots=True)
class Prepared:
    root: Path
    setup: SetupResult
    sandbox: Sandbox  # for the tests: no network
    how: TestCommand
    setup_seconds: float = 0.0


def setup_commands(setup: Sequence[str] | None, root: Path) -> tuple[Argv, ...] | None:
    """The task's set-up (each a command string, split as ``.agent.yaml``'s are, never
    given to a shell), else the checkout's ``.agent.yaml`` ``setup:``, else None
    (detected); raises ``CheckoutError`` for a command or file that cannot be read."""
    try:
        if setup is not None:
            return tuple(command_argv(command) for command in setup)
        path = root / REPO_CONFIG
        if not path.is_file() or path.is_symlink():
            return None
        return parse_repo_config(path.read_text(encoding="utf-8", errors="replace")).setup
    except (ValueError, RepoConfigError) as exc:
        raise CheckoutError(f"the set-up cannot be read: {exc}") from exc


def setup_failure(result: SetupResult) -> str:
    """Why set-up left the checkout unusable ("" when it is ready)."""
    if result.status in _READY:
        return ""
    step = result.failure
    if step is not None:
        how = "timed out" if step.timed_out else f"exit code {step.exit_code}"
        return f"set-up failed: `{step.command}` ({how})"
    return f"set-up {result.status.value}: {result.error or 'no reason given'}"


@contextlib.asynccontextmanager
async def prepared(
    *,
    repo: Path,
    commit: str,
    work_dir: Path,
    setup: Sequence[str] | None,
    test_command: Sequence[str] | None,
    settings: Settings,
) -> AsyncIterator[Prepared]:
    """A checkout of ``commit`` in ``work_dir/checkout``, set up (set-up's logs in
    ``work_dir/setup``); raises ``CheckoutError`` when no checkout could be made. A
    failed set-up is in ``Prepared.setup`` (see ``setup_failure``)."""
    root = work_dir / "checkout"
    if await asyncio.to_thread(root.exists):
        raise CheckoutError(f"{root} already exists: give each scoring a folder of its own")
    try:
        workspace = await check_out(repo, commit, root)
        configured = await asyncio.to_thread(setup_commands, setup, root)
        repository = f"eval:{await project_key(repo, commit)}"
        preparer = setup_preparer(settings, workspace, configured, repository)
        started = time.monotonic()
        result = await preparer.prepare(log_dir=work_dir / "setup")
        took = time.monotonic() - started
        sandbox = Sandbox(settings.sandbox, network=False, hide=hidden_paths(settings),
                          expose=settings.sandbox.expose_paths)  # fmt: skip
        command = tuple(test_command) if test_command else None
        how = TestCommand(command, float(settings.sandbox.timeout))
        yield Prepared(root, result, sandbox, how, took)
    finally:
        await asyncio.to_thread(shutil.rmtree, root, True)
