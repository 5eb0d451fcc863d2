"""The workspace's bounds around one command: the check before it, the fallback watch
while it runs where no overlay can be laid, and what the agent is told after it.

``sandbox.workspace_mb`` and ``sandbox.workspace_files`` are held by the kernel when the
command writes through an overlay (``overlay``); these are the parts around it. Where
the kernel refuses the overlay (Linux before 5.11 in a user namespace, a missing
``mount``/``unshare``/``setpriv``), or without bubblewrap, the workspace is bound
directly and measured once a second (``watch_size``), the strongest bound left: a
command that writes faster (``fallocate``) passes it until the next check.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import weakref
from enum import StrEnum
from pathlib import Path

from bot.config.sections import SandboxSettings
from bot.sandbox.bwrap_probe import SandboxUnavailable
from bot.sandbox.disk import DiskUsageError, Usage, disk_usage
from bot.sandbox.overlay_session import SyncReport
from bot.sandbox.process import CommandResult

__all__ = [
    "WorkspaceBound",
    "WorkspaceFull",
    "after_overlay",
    "refuse_when_full",
    "turn",
    "watch_size",
]

log = logging.getLogger(__name__)

SIZE_CHECK_SECONDS = 1.0  # how often the fallback measures a running command's workspace
_turns: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()


class WorkspaceBound(StrEnum):
    """How the workspace's bounds hold for a command."""

    KERNEL = "kernel"  # an overlay with a bounded tmpfs: a write past them fails
    MEASURED = "measured"  # checked once a second: a fast command passes them meanwhile
    NONE = "none"  # no sandbox (allow_unsandboxed_DANGEROUS): measured as well


class WorkspaceFull(Exception):
    """The workspace is over ``sandbox.workspace_mb`` or ``sandbox.workspace_files``: no
    command runs until it shrinks."""


def turn(root: Path) -> asyncio.Lock:
    """The lock commands in one workspace take turns with: each is given the room left
    when it starts, so two at once could each fill it."""
    return _turns.setdefault(str(root), asyncio.Lock())


def refuse_when_full(used: Usage, settings: SandboxSettings) -> None:
    if used.bytes > settings.workspace_mb << 20:
        raise WorkspaceFull(
            f"the workspace holds more than sandbox.workspace_mb "
            f"({settings.workspace_mb} MB): delete files before running commands"
        )
    if used.files > settings.workspace_files:
        raise WorkspaceFull(
            f"the workspace holds more than sandbox.workspace_files "
            f"({settings.workspace_files} files and folders): delete some before running "
            "commands"
        )


def after_overlay(
    result: CommandResult, report: SyncReport, settings: SandboxSettings
) -> CommandResult:
    """The result as the agent sees it: a note when the command filled its room or some
    of its writes could not be kept."""
    notes = []
    if report.full:
        notes.append(
            f"[the command filled the room it had in the workspace (sandbox.workspace_mb "
            f"{settings.workspace_mb} MB, sandbox.workspace_files {settings.workspace_files}, "
            f"at most sandbox.write_mb {settings.write_mb} MB a command): what it wrote "
            "before that is kept; delete what is not needed]"
        )
    if report.errors:
        shown = "; ".join(report.errors)
        notes.append(f"[some of the command's writes could not be kept: {shown}]")
    if not notes:
        return result
    stderr = result.stderr + ("\n" if result.stderr else "") + "\n".join(notes) + "\n"
    return dataclasses.replace(result, stderr=stderr)


async def watch_size(
    root: Path, settings: SandboxSettings, work: asyncio.Task[CommandResult]
) -> None:
    """The fallback: stop ``work`` when the workspace passes a bound (checked every
    second, by ``du`` in a process of its own)."""
    while not work.done():
        await asyncio.sleep(SIZE_CHECK_SECONDS)
        try:
            refuse_when_full(await disk_usage(root), settings)
        except WorkspaceFull:
            log.warning("a command grew the workspace %s past its bound: stopped", root)
            work.cancel()
            return


async def measure(root: Path) -> Usage:
    """What the workspace holds before a command; a failed count means no sandbox."""
    try:
        return await disk_usage(root)
    except DiskUsageError as exc:
        raise SandboxUnavailable(str(exc)) from exc
