"""Bounded capture of a command's output: the head and the tail, never all of it.

A command may print gigabytes; ``OutputCapture`` keeps the first and the last
``max_chars`` bytes and counts the rest, so memory stays bounded and the agent sees
how the output began and how it ended. ``OutputLog`` keeps the whole output of a
command (both streams, in the order they came, up to a bound) in a file, written off
the event loop, so a person can read what the agent saw only the ends of. The logs of
one task share its run directory's bound (``LogQuota``): a command's log reached 100 MB
in 15 s, and a task runs many commands.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from bot.sandbox.disk import DiskUsageError, disk_usage
from bot.sandbox.textfiles import decode_output
from bot.text import clip, omitted_note


@dataclass(frozen=True, slots=True)
class LogQuota:
    """The room the logs of one task share: its run directory ``root`` may hold at most
    ``limit`` bytes (``storage.run_dir_mb``)."""

    root: Path
    limit: int

    async def room(self) -> int:
        try:
            used = (await disk_usage(self.root)).bytes
        except DiskUsageError:  # not made yet: nothing in it
            used = 0
        return max(self.limit - used, 0)


_CHUNK = 65536


async def command_log(
    path: Path | None, max_bytes: int, quota: LogQuota | None
) -> OutputLog | None:
    """The log of one command: at most ``max_bytes`` (``sandbox.max_file_mb``), less when
    the run directory has less room left."""
    if path is None:
        return None
    if quota is not None:
        room = await quota.room()
        if room < max_bytes:
            return OutputLog(path, room, bound="storage.run_dir_mb")
    return OutputLog(path, max_bytes)


class OutputLog:
    """The whole output of one command in ``path``, at most ``limit`` bytes of it
    (``bound`` names the setting that set the limit, for the note at the end)."""

    def __init__(self, path: Path, limit: int, *, bound: str = "sandbox.max_file_mb") -> None:
        self.path = path
        self.limit = limit
        self.bound = bound
        self.written = 0
        self.dropped = 0
        self._handle: BinaryIO | None = None
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = await asyncio.to_thread(self.path.open, "wb")

    async def write(self, chunk: bytes) -> None:
        part = chunk[: max(self.limit - self.written, 0)]
        self.dropped += len(chunk) - len(part)
        if part and self._handle is not None:
            self.written += len(part)
            async with self._lock:  # the two streams take turns, in the order they came
                await asyncio.to_thread(self._handle.write, part)

    async def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is None:
            return
        if self.dropped:
            note = f"\n[... {self.dropped} more bytes not kept ({self.bound}) ...]\n"
            await asyncio.to_thread(handle.write, note.encode())
        await asyncio.to_thread(handle.close)


class OutputCapture:
    def __init__(self, max_chars: int, sink: OutputLog | None = None) -> None:
        self.max_chars = max_chars
        self.sink = sink
        self.total = 0
        self._head = bytearray()
        self._tail = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.max_chars - len(self._head)
        if room > 0:
            self._head += chunk[:room]
        self._tail += chunk
        if len(self._tail) > self.max_chars:
            del self._tail[: len(self._tail) - self.max_chars]

    async def consume(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_CHUNK):
            self.feed(chunk)
            if self.sink is not None:
                await self.sink.write(chunk)

    @property
    def clipped(self) -> bool:
        """Whether ``text`` leaves part of the output out."""
        return self.total > self.max_chars

    def text(self) -> str:
        if self.total <= len(self._head):
            return clip(
                decode_output(bytes(self._head)), self.max_chars, keep="both", note=omitted_note()
            )
        half = max(self.max_chars // 2, 1)
        head = decode_output(bytes(self._head[:half]))
        tail = decode_output(bytes(self._tail[-half:]))
        omitted = self.total - 2 * half
        return f"{head}\n[... {omitted} bytes of output omitted ...]\n{tail}"
