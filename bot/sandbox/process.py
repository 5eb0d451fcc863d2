"""Run one prepared command line: bounded output, a deadline, and nothing left behind.

``execute`` starts the command in a new session (its own process group), captures
the head and tail of its output, and on timeout (or cancellation) kills the whole
group and, when there is one, every member of its cgroup. With a ``log`` it also
keeps the whole output in a file (``OutputLog``). Under bubblewrap, killing
bwrap ends its PID namespace, which takes every process of the command with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.sandbox.cgroups import PidsCgroup
from bot.sandbox.output import OutputCapture, OutputLog

_DRAIN_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration: float
    clipped: bool = False  # stdout or stderr holds only the head and tail of the output


async def execute(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    cgroup: PidsCgroup | None,
    max_chars: int,
    log: OutputLog | None = None,
    pass_fds: tuple[int, ...] = (),
    spawned: Callable[[], None] | None = None,
) -> CommandResult:
    """Run ``argv``; a timeout is a result (``timed_out``), not an exception. ``log``
    (opened here, closed on every path) receives the whole output. ``pass_fds`` stay
    open in the child; ``spawned`` is called once it has started (to close the parent's
    copies of them)."""
    spawn = _Spawn(pass_fds, spawned)
    if log is None:
        return await _execute(argv, cwd, env, timeout, cgroup, max_chars, None, spawn)
    await log.open()
    try:
        return await _execute(argv, cwd, env, timeout, cgroup, max_chars, log, spawn)
    finally:
        await log.close()


@dataclass(frozen=True, slots=True)
class _Spawn:
    pass_fds: tuple[int, ...]
    spawned: Callable[[], None] | None


async def _execute(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    cgroup: PidsCgroup | None,
    max_chars: int,
    log: OutputLog | None,
    spawn: _Spawn,
) -> CommandResult:
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, start_new_session=True, pass_fds=spawn.pass_fds,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    finally:
        if spawn.spawned is not None:
            spawn.spawned()
    assert proc.stdout is not None and proc.stderr is not None
    out, err = OutputCapture(max_chars, log), OutputCapture(max_chars, log)
    readers = [
        asyncio.create_task(out.consume(proc.stdout)),
        asyncio.create_task(err.consume(proc.stderr)),
    ]
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        timed_out = True
    except asyncio.CancelledError:  # the caller gave up: nothing may outlive the call
        _kill(proc.pid, cgroup)
        for task in readers:
            task.cancel()
        raise
    _kill(proc.pid, cgroup)
    await proc.wait()
    await _drain(readers)
    return CommandResult(
        exit_code=proc.returncode if proc.returncode is not None else -1,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        duration=time.monotonic() - started,
        clipped=out.clipped or err.clipped,
    )


def _kill(pgid: int, cgroup: PidsCgroup | None) -> None:
    """Kill what is left of the command: its process group (bwrap's death ends its PID
    namespace) and every member of its cgroup."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if cgroup is not None:
        cgroup.kill_all()


async def _drain(readers: list[asyncio.Task[None]]) -> None:
    _, pending = await asyncio.wait(readers, timeout=_DRAIN_SECONDS)
    for task in pending:  # a leftover process holds the pipe open
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
