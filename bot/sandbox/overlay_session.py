"""One command's overlay, from the bot's side: the handshake and the layer's application.

The pipes: bwrap writes the sandbox's PID to ``info`` (``--info-fd``), the wrapper
(``overlay.WRAPPER``) says "ready" on ``ready`` once its mounts are in place and waits
for a line on ``ack``. In between, ``attach`` opens the upper layer through
``/proc/<pid>/root``: that descriptor keeps the tmpfs alive after the sandbox is gone,
and the command cannot have run yet. When the command has ended, ``apply`` hands the
descriptor to ``upper_sync.py``, run by Python in a process of its own (a layer may hold
thousands of files: no walk on the event loop, a shared thread or the GIL).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot.sandbox.bwrap import DEFAULT_PATH, WRITES_DIR
from bot.sandbox.process import CommandResult

__all__ = ["OverlayFailed", "OverlaySession", "SyncReport", "run_overlaid"]

_INFO_LIMIT = 64 * 1024
SYNC_SCRIPT = Path(__file__).with_name("upper_sync.py")  # run by path: stdlib only
_SHOWN_ERRORS = 5


class OverlayFailed(Exception):
    """The overlay could not be laid or attached; the command did not run."""


@dataclass(frozen=True, slots=True)
class SyncReport:
    files: int = 0
    removed: int = 0
    errors: tuple[str, ...] = ()
    full: bool = False  # the layer ran out of bytes or inodes


@dataclass(slots=True)
class _Pipe:
    read: int
    write: int

    @classmethod
    def new(cls) -> _Pipe:
        read, write = os.pipe()
        return cls(read, write)


@dataclass(slots=True)
class OverlaySession:
    info: _Pipe = field(default_factory=_Pipe.new)
    ready: _Pipe = field(default_factory=_Pipe.new)
    ack: _Pipe = field(default_factory=_Pipe.new)
    upper: int | None = None

    @property
    def child_fds(self) -> tuple[int, int, int]:
        """The ends the sandbox gets (closed here once it has them: ``execute``)."""
        return self.info.write, self.ready.write, self.ack.read

    def close_child_fds(self) -> None:
        """Close the bot's copies of the sandbox's ends (once it has them), so that a
        sandbox that dies reads as EOF; idempotent."""
        for fd in self.child_fds:
            _close(fd)
        self.info.write = self.ready.write = self.ack.read = -1

    async def attach(self) -> None:
        """Wait for the wrapper's mounts, open the upper layer, let the command start."""
        info = await _read_until(self.info.read, b"}")
        try:
            pid = int(json.loads(info)["child-pid"])
        except (ValueError, KeyError, TypeError) as exc:
            raise OverlayFailed(f"bwrap did not report the sandbox's PID: {info[:200]!r}") from exc
        said = await _read_until(self.ready.read, b"ready")
        if said.strip() != b"ready":
            raise OverlayFailed("the sandbox ended before its overlay was in place")
        where = f"/proc/{pid}/root{WRITES_DIR}/upper"
        try:
            self.upper = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise OverlayFailed(f"cannot open the sandbox's upper layer: {exc}") from exc
        os.write(self.ack.write, b"go\n")
        for fd in (self.info.read, self.ready.read, self.ack.write):  # nothing more to say
            _close(fd)
        self.info.read = self.ready.read = self.ack.write = -1

    async def apply(self, root: Path) -> SyncReport:
        """Write the layer into ``root`` (nothing to do for a command that wrote nothing)."""
        if self.upper is None:
            return SyncReport()
        full = _layer_full(self.upper)
        if _empty(self.upper):  # the common case: a command that only read
            return SyncReport(full=full)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", str(SYNC_SCRIPT), str(self.upper), str(root),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, pass_fds=(self.upper,),
            env={"PATH": DEFAULT_PATH, "LC_ALL": "C.UTF-8"},
        )  # fmt: skip
        try:
            out, err = await proc.communicate()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise
        try:
            summary = json.loads(out)
        except ValueError:
            detail = err.decode(errors="replace").strip()[-500:]
            return SyncReport(errors=(f"applying the command's writes failed: {detail}",))
        return SyncReport(
            files=int(summary["files"]), removed=int(summary["removed"]),
            errors=tuple(summary["errors"][:_SHOWN_ERRORS]), full=full,
        )  # fmt: skip

    def close(self) -> None:
        self.close_child_fds()
        for fd in (self.info.read, self.ready.read, self.ack.write, self.upper):
            _close(fd)
        self.info.read = self.ready.read = self.ack.write = -1
        self.upper = None


async def run_overlaid(
    launch: Callable[[OverlaySession], Awaitable[CommandResult]], root: Path
) -> tuple[CommandResult, SyncReport]:
    """Start the command (``launch`` hands ``child_fds`` to it), attach to its overlay,
    wait for it, then apply its writes to ``root``. Raises ``OverlayFailed`` when the
    overlay could not be laid (the command did not run)."""
    session = OverlaySession()
    try:
        work = asyncio.ensure_future(launch(session))
        attached = asyncio.ensure_future(session.attach())
        try:
            await asyncio.wait({work, attached}, return_when=asyncio.FIRST_COMPLETED)
            if not attached.done() or attached.exception() is not None:
                failure = attached.exception() if attached.done() else None
                _close(session.ack.write)  # the wrapper reads EOF: the command never runs
                session.ack.write = -1
                attached.cancel()
                result = await work
                said = result.stderr.strip()[-500:]
                detail = f"{failure}: {said}" if failure and said else str(failure or said)
                raise OverlayFailed(detail or f"the sandbox exited with {result.exit_code}")
            result = await work
        finally:
            for pending in (work, attached):
                pending.cancel()
            await asyncio.gather(work, attached, return_exceptions=True)
        return result, await session.apply(root)
    finally:
        session.close()


def _close(fd: int | None) -> None:
    if fd is not None and fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


def _empty(folder: int) -> bool:
    """Whether the folder holds nothing; reads one entry, not a listing of thousands."""
    with os.scandir(folder) as entries:  # reads through a duplicate, then rewinds
        return next(entries, None) is None


def _layer_full(upper: int) -> bool:
    try:
        stats = os.fstatvfs(upper)
    except OSError:
        return False
    return stats.f_bavail == 0 or stats.f_favail == 0


def _wake(readable: asyncio.Future[None]) -> None:
    if not readable.done():
        readable.set_result(None)


async def _read_until(fd: int, end: bytes) -> bytes:
    """Read ``fd`` on the loop (non-blocking) until the data ends with ``end`` or EOF."""
    os.set_blocking(fd, False)
    loop = asyncio.get_running_loop()
    data = bytearray()
    while len(data) < _INFO_LIMIT and not data.rstrip().endswith(end):
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _wake, readable)
        try:
            await readable
        finally:
            loop.remove_reader(fd)
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            continue
        if not chunk:
            break
        data += chunk
    return bytes(data)
