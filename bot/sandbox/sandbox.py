"""Run one command (an argv list, never a shell string) inside a bubblewrap sandbox.

``Sandbox.run`` refuses destructive commands (``command_guard``), puts the workspace's
prepared environment first on PATH (``project_env``), builds the bwrap
command line (``bwrap``: read-only host, secrets hidden, one writable workspace, no
network unless allowed, no capabilities, a clean environment), applies resource
limits with ``prlimit`` and, where it may, a per-command ``pids`` cgroup (the process
limit that also holds for root), enforces a wall-clock timeout that kills every
process of the command, and keeps only the head and tail of long output.

The workspace's bounds (``sandbox.workspace_mb``, ``sandbox.workspace_files``) are held
by the kernel: the command writes through an overlay whose layer is a bounded tmpfs,
applied to the workspace when it ends (``overlay``, ``overlay_session``,
``upper_sync``). Where no overlay can be laid, the workspace is bound directly and
measured once a second (``workspace_bound``); ``Sandbox.bound`` says which.

A command with network still has its own network namespace: it reaches the package
indexes through the egress proxy (``egress``), served for the length of the command
on a Unix socket bound into the sandbox and relayed to the sandbox's loopback by
``egress_forwarder``; the host's loopback, its other addresses, private networks and
the metadata service stay out of reach. What the proxy refused ends the command's
stderr.

Without bubblewrap ``run`` raises ``SandboxUnavailable`` saying how to install it;
only ``sandbox.allow_unsandboxed_DANGEROUS: true`` runs commands without it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bot.config import SandboxSettings, Settings, previous_config_path
from bot.progress import step
from bot.sandbox.bwrap import DEFAULT_PATH, Limits, bwrap_argv, limit_argv, sandbox_env
from bot.sandbox.bwrap_probe import INSTALL_HINT, SandboxUnavailable, ensure_bwrap_works
from bot.sandbox.cgroups import PidsCgroup, remove_cgroup
from bot.sandbox.command_guard import refusal
from bot.sandbox.command_inputs import checked_argv, checked_dirs, project_env
from bot.sandbox.disk import Usage
from bot.sandbox.egress import Resolve
from bot.sandbox.egress_door import Door, close_door, forwarder_argv, open_door, with_refusals
from bot.sandbox.egress_policy import EgressPolicy, read_policy
from bot.sandbox.mounts import command_mounts
from bot.sandbox.output import LogQuota, command_log
from bot.sandbox.overlay import write_room
from bot.sandbox.overlay_session import OverlayFailed
from bot.sandbox.process import CommandResult, execute
from bot.sandbox.sandbox_runs import Command, probe_overlay, run_in_overlay, run_measured
from bot.sandbox.workspace_bound import (
    WorkspaceBound,
    WorkspaceFull,
    measure,
    refuse_when_full,
    turn,
)

__all__ = [
    "CommandRefused",
    "CommandResult",
    "Sandbox",
    "SandboxUnavailable",
    "WorkspaceBound",
    "WorkspaceFull",
    "hidden_paths",
]

log = logging.getLogger(__name__)

_BWRAP_TASKS = 2  # bwrap itself and its init process inside the PID namespace
_overlay_errors: dict[str, str | None] = {}


class CommandRefused(Exception):
    """The command guard refused the command before it ran; the message says why."""


def hidden_paths(settings: Settings) -> list[Path]:
    """The bot's own files a sandboxed command must not see: the data directory, the
    configuration file (and the one ``PUT /api/config`` replaced) and the secret files
    the configuration names."""
    candidates = [
        settings.data_dir,
        settings.source_path,
        previous_config_path(settings.source_path) if settings.source_path else None,
        settings.github.private_key_path,
        settings.github.webhook_secret_file,
        settings.gitlab.token_file,
        settings.gitlab.webhook_secret_file,
        *(source.file for source in settings.gitlab.webhook_secrets.values()),
    ]
    return [Path(p).expanduser().absolute() for p in candidates if p is not None]


class Sandbox:
    def __init__(
        self,
        settings: SandboxSettings,
        *,
        network: bool | None = None,
        hide: Sequence[Path] = (),
        expose: Sequence[Path] = (),
        bwrap: str | None = None,
        log_quota: LogQuota | None = None,
        egress: EgressPolicy | None = None,
        resolve: Resolve | None = None,
    ) -> None:
        """``hide``: more paths no command may see (see ``hidden_paths``); ``expose``:
        paths to show read-only although they lie in a hidden directory, such as a
        toolchain installed under /root; ``bwrap``: the bubblewrap binary (default: PATH);
        ``log_quota``: the run directory's bound, which commands' logs share;
        ``egress``: where a command with network may connect (default: read from the
        host's pip and npm configuration and ``sandbox.egress_allow`` on first use);
        ``resolve``: how the egress proxy looks a name up (default: the system's resolver)."""
        self.settings = settings
        self.log_quota = log_quota
        self._egress = egress
        self._resolve = resolve
        self.network = settings.network if network is None else network
        self._hide = tuple(Path(p).absolute() for p in hide)
        self._expose = tuple(Path(p).absolute() for p in expose)
        found = shutil.which("bwrap") if bwrap is None else bwrap
        self._bwrap = found if found and os.access(found, os.X_OK) else None
        self._warned_nproc = False
        if self._bwrap is None and settings.allow_unsandboxed_DANGEROUS:
            log.warning(
                "DANGEROUS: bubblewrap is missing and sandbox.allow_unsandboxed_DANGEROUS is "
                "true: agent commands will run WITHOUT a sandbox, with the bot's own rights"
            )

    @property
    def sandboxed(self) -> bool:
        return self._bwrap is not None

    def limits(self) -> Limits:
        return Limits.of(self.settings)

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        writable: Path | None = None,
        log_path: Path | None = None,
    ) -> CommandResult:
        """Run ``argv`` in ``cwd``; only ``writable`` (default: ``cwd``) may be written.
        ``log_path``: a file (outside the sandbox) for the whole output, at most
        ``sandbox.max_file_mb`` of it (less when the run directory's ``log_quota`` has
        less room).

        Raises ``CommandRefused`` (guard), ``SandboxUnavailable`` (no bubblewrap),
        ``WorkspaceFull`` and ``ValueError`` (bad argv or directories). A non-zero exit
        is a result, not an error.
        """
        args = checked_argv(argv)
        reason = refusal(args)
        if reason is not None:
            raise CommandRefused(reason)
        cwd, writable = checked_dirs(cwd, writable)
        async with turn(writable):  # each command is given the room left when it starts
            used = await measure(writable)
            refuse_when_full(used, self.settings)
            command = Command(
                args, cwd, writable, {**project_env(writable), **(env or {})},
                float(timeout if timeout is not None else self.settings.timeout),
                await command_log(log_path, self.settings.max_file_mb << 20, self.log_quota),
            )  # fmt: skip
            door = await self._open_door()
            try:
                if door is not None:
                    command = dataclasses.replace(command, egress_socket=door.socket)
                return with_refusals(await self._launch(command, used), door)
            finally:
                await close_door(door)

    async def _launch(self, command: Command, used: Usage) -> CommandResult:
        if await self.bound() is not WorkspaceBound.KERNEL:
            return await run_measured(self, command)
        room = write_room(
            used, max_bytes=self.settings.workspace_mb << 20,
            max_files=self.settings.workspace_files, write_bytes=self.settings.write_mb << 20,
        )  # fmt: skip
        try:
            return await run_in_overlay(self, command, room)
        except OverlayFailed as exc:
            raise SandboxUnavailable(f"the sandbox could not lay its overlay: {exc}") from exc

    async def _open_door(self) -> Door | None:
        """For a sandboxed command with network: the egress proxy, for the length of the
        command (``egress_door``)."""
        if not self.network or self._bwrap is None:
            return None
        if self._egress is None:
            allow = self.settings.egress_allow
            self._egress = await asyncio.to_thread(read_policy, os.environ, Path.home(), allow)
        return await open_door(self._egress, self._resolve)

    async def bound(self) -> WorkspaceBound:
        """How the workspace's bounds hold here (an overlay is tried once per bwrap)."""
        if self._bwrap is None:
            return WorkspaceBound.NONE
        if self._bwrap not in _overlay_errors:
            await ensure_bwrap_works(self._bwrap)
            _overlay_errors[self._bwrap] = error = await probe_overlay(self)
            if error is not None:
                log.warning(
                    "the workspace bounds are checked once a second only, not held by the "
                    "kernel: an overlay cannot be laid in the sandbox here (%s)", error,
                )  # fmt: skip
        return WorkspaceBound.MEASURED if _overlay_errors[self._bwrap] else WorkspaceBound.KERNEL

    @property
    def overlay_refused(self) -> str | None:
        """Why no overlay could be laid (after ``bound``), or None."""
        return _overlay_errors.get(self._bwrap) if self._bwrap else None

    async def start(
        self,
        command: Command,
        argv: list[str],
        env: dict[str, str],
        pass_fds: tuple[int, ...] = (),
        spawned: Callable[[], None] | None = None,
    ) -> CommandResult:
        """Run the full ``argv`` of ``command`` in a pids cgroup of its own, if one can be
        made (``sandbox_runs.Launcher``)."""
        cgroup = PidsCgroup.create(self.settings.max_processes + _BWRAP_TASKS)
        self._warn_unlimited(cgroup)
        joined = (cgroup.join_argv() if cgroup else []) + argv
        try:
            with step(f"sandbox command {command.args[0]}"):  # the watchdog sees each one
                return await execute(
                    joined, cwd=command.cwd, env=env, timeout=command.timeout, cgroup=cgroup,
                    max_chars=self.settings.max_output_chars, log=command.log,
                    pass_fds=pass_fds, spawned=spawned,
                )  # fmt: skip
        finally:
            if cgroup is not None:
                await remove_cgroup(cgroup)

    async def command_line(
        self, command: Command, overlay: tuple[int, list[str]] | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """``sandbox_runs.Launcher``: see ``_prefix``."""
        return await self._prefix(
            command.cwd, command.writable, command.env, overlay, command.egress_socket
        )

    async def _prefix(
        self,
        cwd: Path,
        writable: Path,
        env: Mapping[str, str] | None,
        overlay: tuple[int, list[str]] | None = None,
        egress_socket: Path | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """bwrap (``overlay``: bwrap's info descriptor and the overlay's wrapper, which
        runs between bwrap and the limits), the limits of the command and, with
        ``egress_socket``, the forwarder that relays the sandbox's loopback to the egress
        proxy and then starts the command."""
        prlimit = shutil.which("prlimit")
        if prlimit is None:
            raise SandboxUnavailable("prlimit (util-linux) is missing: install util-linux")
        limits = limit_argv(prlimit, self.limits())
        if self._bwrap is None:
            if not self.settings.allow_unsandboxed_DANGEROUS:
                raise SandboxUnavailable(INSTALL_HINT)
            log.warning("DANGEROUS: running a command without a sandbox in %s", cwd)
            return limits, sandbox_env(env)
        await ensure_bwrap_works(self._bwrap)
        mounts = command_mounts(
            writable, hide=self._hide, expose=self._expose,
            tmp_bytes=self.settings.tmp_mb << 20, shm_bytes=self.settings.shm_mb << 20,
            overlay_info_fd=overlay[0] if overlay else None,
        )  # fmt: skip
        forwarder: list[str] = []
        if egress_socket is not None:  # the socket is shown; the forwarder starts the command
            mounts = dataclasses.replace(mounts, expose=(*mounts.expose, egress_socket))
            forwarder = await forwarder_argv(egress_socket)
        prefix = bwrap_argv(self._bwrap, mounts, cwd=cwd, env=sandbox_env(env))
        wrapper = overlay[1] if overlay else []
        return prefix + wrapper + limits + forwarder, {"PATH": DEFAULT_PATH}

    def _warn_unlimited(self, cgroup: PidsCgroup | None) -> None:
        if cgroup is None and os.getuid() == 0 and not self._warned_nproc:
            self._warned_nproc = True
            log.warning(
                "the bot runs as root and cannot create a pids cgroup: the process limit "
                "(sandbox.max_processes) is not enforced; run the bot as a normal user or "
                "delegate the cgroup pids controller"
            )
