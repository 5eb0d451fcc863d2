"""Set-up's commands, run one by one in a sandbox within one deadline; each command's
whole output goes to the run directory (``setup/NN-<program>.log``, numbered across
every command of one set-up), and a failing one is kept with its tail."""

from __future__ import annotations

import asyncio
import functools
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bot import tracing
from bot.sandbox.sandbox import CommandRefused, Sandbox, WorkspaceFull
from bot.sandbox.setup_plan import Argv
from bot.sandbox.setup_result import SetupStep

TAIL_CHARS = 3000
TAIL_LINES = 40


@dataclass
class StepRunner:
    """Runs the commands of one set-up, which began at ``started`` (a value of ``clock``)
    and has ``timeout`` seconds for all of them."""

    log_dir: Path | None
    started: float
    timeout: float
    clock: Callable[[], float]
    number: int = 0

    def elapsed(self) -> float:
        return self.clock() - self.started

    async def run(
        self,
        sandbox: Sandbox,
        commands: tuple[Argv, ...],
        root: Path,
        env: Mapping[str, str],
        *,
        base: bool = False,
    ) -> list[SetupStep]:
        """Run ``commands`` in ``root`` until one fails (the last step then); raises
        ``SandboxUnavailable`` (no command can run on this server)."""
        steps: list[SetupStep] = []
        for argv in commands:
            self.number += 1
            log = self.log_dir / f"{self.number:02d}-{_program(argv)}.log" if self.log_dir else None
            left = self.started + self.timeout - self.clock()
            with tracing.command_span("setup step", shlex.join(argv)) as span:
                step = await _run_step(sandbox, argv, root, dict(env), left, log, base=base)
                tracing.command_ended(span, step.exit_code, timed_out=step.timed_out,
                                      ok=step.ok)  # fmt: skip
            steps.append(step)
            if not step.ok:
                break
        return steps


async def _run_step(
    sandbox: Sandbox,
    argv: Argv,
    root: Path,
    env: dict[str, str],
    left: float,
    log: Path | None,
    *,
    base: bool,
) -> SetupStep:
    command = shlex.join(argv)
    where = functools.partial(SetupStep, command, network=sandbox.network, base=base)
    if left <= 0:
        tail = "set-up ran out of time (sandbox.setup_timeout)"
        return where(-1, True, 0.0, tail)
    try:
        result = await sandbox.run(
            argv, cwd=root, writable=root, timeout=left, env=env, log_path=log
        )
    except (CommandRefused, WorkspaceFull, ValueError) as exc:
        return where(-1, False, 0.0, str(exc))
    tail = await asyncio.to_thread(_log_tail, log) if log else ""
    if not tail:
        tail = _tail(result.stdout + ("\n" if result.stdout else "") + result.stderr)
    name = f"{log.parent.name}/{log.name}" if log else ""
    return where(result.exit_code, result.timed_out, result.duration, tail, name)


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
