"""Bounded capture of a command's output: the head and the tail, never all of it.

A command may print gigabytes; ``OutputCapture`` keeps the first and the last
``max_chars`` bytes and counts the rest, so memory stays bounded and the agent sees
how the output began and how it ended.
"""

from __future__ import annotations

import asyncio

from bot.text import clip, omitted_note
from bot.tools.textfiles import decode_output

_CHUNK = 65536


class OutputCapture:
    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
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
