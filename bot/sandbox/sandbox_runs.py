"""The two ways a sandboxed command runs against its workspace's bounds.

``run_in_overlay``: through an overlay whose layer the kernel bounds (``overlay``), the
layer applied to the workspace when the command ends (``overlay_session``).
``run_measured``: the workspace bound directly, measured once a second, where no
overlay can be laid (``probe_overlay`` says whether one can). Both take the
``Sandbox`` as a ``Launcher``: its command line and its way of starting a process.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bot.config.sections import SandboxSettings
from bot.sandbox.output import OutputLog
from bot.sandbox.overlay import Helpers, WriteRoom, wrapper_argv
from bot.sandbox.overlay_session import OverlayFailed, OverlaySession, run_overlaid
from bot.sandbox.process import CommandResult
from bot.sandbox.workspace_bound import after_overlay, watch_size

__all__ = ["Command", "Launcher", "probe_overlay", "run_in_overlay", "run_measured"]


@dataclass(frozen=True, slots=True)
class Command:
    """One command as the sandbox runs it (argv checked, directories resolved)."""

    args: list[str]
    cwd: Path
    writable: Path
    env: dict[str, str]
    timeout: float
    log: OutputLog | None = None
    egress_socket: Path | None = None  # the egress proxy's socket, for a command with network


class Launcher(Protocol):
    settings: SandboxSettings

    async def command_line(
        self, command: Command, overlay: tuple[int, list[str]] | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """The prefix of the command's argv (bwrap, ``overlay``'s wrapper, the limits)
        and the environment to start it with."""
        ...

    async def start(
        self,
        command: Command,
        argv: list[str],
        env: dict[str, str],
        pass_fds: tuple[int, ...] = (),
        spawned: Callable[[], None] | None = None,
    ) -> CommandResult:
        """Run the full ``argv`` (in its cgroup, under the watchdog) to its end."""
        ...


def helpers() -> Helpers | None:
    """The host's mount, umount, unshare and setpriv, or None when one is missing."""
    found = [shutil.which(name) for name in ("mount", "umount", "unshare", "setpriv")]
    if not all(found):
        return None
    mount, umount, unshare, setpriv = (str(path) for path in found)
    return Helpers(mount=mount, umount=umount, unshare=unshare, setpriv=setpriv)


async def run_in_overlay(launcher: Launcher, command: Command, room: WriteRoom) -> CommandResult:
    """Raises ``OverlayFailed`` when the overlay could not be laid (nothing ran)."""
    found = helpers()
    if found is None:
        raise OverlayFailed("mount, umount, unshare or setpriv (util-linux) is missing")

    async def launch(session: OverlaySession) -> CommandResult:
        wrapper = wrapper_argv(
            found, room, root=command.writable, cwd=command.cwd,
            ready_fd=session.ready.write, ack_fd=session.ack.read,
            uid=os.getuid(), gid=os.getgid(),
        )  # fmt: skip
        prefix, env = await launcher.command_line(command, (session.info.write, wrapper))
        return await launcher.start(
            command, prefix + command.args, env, session.child_fds, session.close_child_fds
        )

    result, report = await run_overlaid(launch, command.writable)
    return after_overlay(result, report, launcher.settings)


async def run_measured(launcher: Launcher, command: Command) -> CommandResult:
    """The fallback: the workspace bound directly; a command that grows it past a bound
    is stopped at the next check."""
    settings = launcher.settings
    prefix, env = await launcher.command_line(command)
    started = time.monotonic()
    work = asyncio.create_task(launcher.start(command, prefix + command.args, env))
    watcher = asyncio.create_task(watch_size(command.writable, settings, work))
    try:
        return await work
    except asyncio.CancelledError:
        if asyncio.current_task().cancelling() or not watcher.done():  # type: ignore[union-attr]
            raise
        return CommandResult(
            exit_code=-1, stdout="", timed_out=False, duration=time.monotonic() - started,
            stderr=f"stopped: the command grew the workspace past sandbox.workspace_mb "
            f"({settings.workspace_mb} MB) or sandbox.workspace_files "
            f"({settings.workspace_files}); delete what it wrote before going on",
        )  # fmt: skip
    finally:
        watcher.cancel()


async def probe_overlay(launcher: Launcher) -> str | None:
    """Lay an overlay over a scratch folder and write through it: None when that works,
    else why not."""
    scratch = Path(tempfile.mkdtemp(prefix="bot-overlay-probe-"))
    try:
        probe = Command(["/bin/sh", "-c", "echo ok > probe"], scratch, scratch, {}, 60.0)
        result = await run_in_overlay(launcher, probe, WriteRoom(bytes=1 << 20, inodes=64))
        if result.exit_code != 0 or not (scratch / "probe").is_file():
            return f"the probe exited with {result.exit_code}: {result.stderr.strip()}"
        return None
    except OverlayFailed as exc:
        return str(exc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
